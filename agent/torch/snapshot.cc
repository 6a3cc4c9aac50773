#include "agent/torch/snapshot.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <atomic>
#include <cstring>

#include "agent/torch/buffer_pool.h"
#include "agent/torch/snapshot_cache.h"
#include "agent/torch/tensor_bits.h"
#include "common/torch/ivalue_walk.h"

namespace parity::agent {
namespace {

// Snapshot buffers: host copies of at least this many bytes come from the pool.
constexpr uint64_t kPooledMinBytes = 16 << 10;
std::atomic<bool> g_pool_on{true};

BufferPool& SnapshotPool() {
  static BufferPool* pool = new BufferPool(uint64_t{128} << 20);  // outlives every snapshot
  return *pool;
}

// A copy of `d` the training cannot change: a CPU tensor of kPooledMinBytes or more into a pooled
// buffer (no page faults once the pool is warm), anything else by clone(). A CPU tensor whose
// elements fill their memory span (contiguous, or a permutation of it: a linear layer's weight as
// addmm reads it, weight.t()) is copied with one memcpy, in its own layout, so that the compares
// that prove it unchanged later (the snapshot cache's, the read-only check's) are one memcmp too;
// the sender makes it row-major when it first sends it. copy_ and clone go through the
// dispatcher and set up a TensorIterator for every tensor of every call (measured:
// docs/performance.md). `d` may require grad: what goes through the dispatcher takes it
// detached, so that the copy is no node of the training's graph.
at::Tensor PooledCopy(const at::Tensor& d) {
  const uint64_t bytes = static_cast<uint64_t>(d.numel()) * d.element_size();
  const bool cpu = d.device().is_cpu() && d.layout() == at::kStrided;
  const bool dense = cpu && bytes > 0 && d.is_non_overlapping_and_dense();
  if (!cpu || bytes < kPooledMinBytes || !g_pool_on.load(std::memory_order_relaxed)) {
    if (!dense) return d.detach().clone(at::MemoryFormat::Contiguous);
    at::Tensor out = at::empty_strided(d.sizes(), d.strides(), d.options());
    std::memcpy(out.data_ptr(), d.data_ptr(), bytes);
    return out;
  }
  uint64_t capacity = 0;
  void* buffer = SnapshotPool().Take(bytes, &capacity);
  if (buffer == nullptr) return d.detach().clone(at::MemoryFormat::Contiguous);
  const auto give = [capacity](void* p) { SnapshotPool().Give(p, capacity); };
  if (dense) {
    std::memcpy(buffer, d.data_ptr(), bytes);
    return at::from_blob(buffer, d.sizes(), d.strides(), give, d.options());
  }
  at::Tensor out = at::from_blob(buffer, d.sizes(), give, d.options());
  out.copy_(d.detach());
  return out;
}

// The device compares `copy` with the earlier snapshot of `d`, bit for bit, on its stream: the
// sender gives the call that snapshot's host copy only if nothing differs. A device without the
// comparison's kernels (or a dtype without an integer view) copies out as usual.
void NoteDeviceCandidate(const at::Tensor& d, const at::Tensor& copy, TorchValues& call) {
  const at::Tensor earlier = EarlierDeviceSnapshot(d);
  if (!earlier.defined()) return;
  try {
    if (at::Tensor changed = DeviceBitsDiffer(copy, earlier); changed.defined()) {
      call.host_candidates.push_back({copy, earlier, std::move(changed)});
    }
  } catch (const std::exception&) {
  }
}

}  // namespace

bool HasData(const at::Tensor& t) {
  if (t.is_meta()) return false;
  const c10::DispatchKeySet keys = t.key_set();
  return !keys.has(c10::DispatchKey::Python) && !keys.has(c10::DispatchKey::Functionalize) &&
         !keys.has(c10::DispatchKey::Meta);
}

uint64_t ValueBytes(const c10::IValue& v) {
  uint64_t n = 0;
  common::ForEachLeaf(v, [&n](const c10::IValue& leaf) {
    if (leaf.isTensor() && leaf.toTensor().defined()) {
      n += leaf.toTensor().numel() * leaf.toTensor().element_size();
    }
  });
  return n;
}

// A copy the training cannot change afterwards (in-place ops, later steps). On an accelerator
// this is a device-side copy queued on the training's stream: the training thread does not
// wait; the sender copies it to the host after the call's event. Notes the accelerator in
// `call` so that the event is recorded without walking the values again.
c10::IValue Snapshot(const c10::IValue& v, TorchValues& call) {
  return common::MapLeaves(v, [&call](const c10::IValue& leaf) {
    if (leaf.isTensor()) {
      const at::Tensor& t = leaf.toTensor();
      if (!t.defined() || t.is_sparse() || t.is_quantized()) return leaf;
      if (!HasData(t)) return c10::IValue();  // nothing to copy (the call is not captured)
      if (!call.accelerator && !t.device().is_cpu() && !t.is_meta()) {
        call.accelerator = t.device();
      }
      // The tensor itself, not a detach() of it (a new TensorImpl a tensor a call): the lookups
      // and memcpy below read only its storage, view and version; what goes through the
      // dispatcher (PooledCopy's copy_ and clone) detaches first.
      at::Tensor resolved;
      if (t.is_conj() || t.is_neg()) {
        resolved = t.detach();
        if (resolved.is_conj()) resolved = resolved.resolve_conj();
        if (resolved.is_neg()) resolved = resolved.resolve_neg();
      }
      const at::Tensor& d = resolved.defined() ? resolved : t;
      // A host tensor whose bits all equal an earlier snapshot's (a weight between optimizer
      // steps, an activation the next op reads) is not copied again; on a device the copy is
      // made there and the copy out of it saved (agent/torch/snapshot_cache.h).
      if (at::Tensor cached = CachedSnapshot(d); cached.defined()) return c10::IValue(cached);
      at::Tensor copy = PooledCopy(d);
      if (!d.device().is_cpu()) NoteDeviceCandidate(d, copy, call);
      RememberSnapshot(d, copy);
      return c10::IValue(std::move(copy));
    }
    if (leaf.isString()) return c10::IValue(std::string(leaf.toStringRef()));  // deep (1.13)
    // A generator travels as None; a random op's generator state goes in ApiCall.generator.
    if (leaf.isGenerator()) return c10::IValue();
    return leaf;
  });
}

// Records, on the current stream of the call's accelerator, the event after which its device
// snapshots are complete. A device without events gets host copies now (synchronously).
void MarkDeviceReady(TorchValues& call) {
  if (!call.accelerator) return;
  const c10::Device device = *call.accelerator;
  try {
    c10::impl::VirtualGuardImpl impl(device.type());
    c10::Event event(device.type());
    event.record(impl.getStream(device));
    call.device_ready.emplace(std::move(event));
  } catch (const std::exception&) {
    call.host_candidates.clear();  // nothing to wait for: every snapshot is copied out now
    for (auto* values : {&call.inputs, &call.outputs}) {
      for (c10::IValue& v : *values) v = ToHost(v);
    }
  }
}

void ConfigureSnapshotPool(uint64_t max_cached_bytes) {
  SnapshotPool().SetMaxCached(max_cached_bytes);
  ConfigureSnapshotCache(max_cached_bytes);
  g_pool_on.store(max_cached_bytes > 0, std::memory_order_relaxed);
}

}  // namespace parity::agent
