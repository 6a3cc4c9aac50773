#include "agent/torch/torch_values.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstddef>
#include <cstring>
#include <mutex>

#include "agent/torch/input_writes.h"
#include "agent/torch/snapshot_cache.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/wire_encoder.h"
#include "common/wire/fields.h"

namespace parity::agent {
namespace {

// The transport's blob sink as the encoder's. A host tensor's payload sent before from that same
// tensor (a snapshot the snapshot cache gave again, in the training's layout or not) is named by
// its blob id without the transport reading it (parity_encode_limits.add_known, when the
// transport has it); the rest go to add_reusable, which hashes and compares, and are remembered
// by their snapshot. A snapshot never changes, so its id stays true while the transport holds it.
class SinkAdapter : public common::BlobSink {
 public:
  SinkAdapter(const parity_blob_sink* sink, const parity_encode_limits& limits) : sink_(sink) {
    if (limits.size >= offsetof(parity_encode_limits, add_known) + sizeof(limits.add_known)) {
      add_known_ = limits.add_known;
    }
  }
  uint64_t AddBlob(std::string_view bytes) override {
    return sink_->add_blob(sink_->ctx, bytes.data(), bytes.size());
  }
  uint64_t KnownReusable(const at::Tensor& source) override {
    if (add_known_ == nullptr) return 0;
    const uint64_t id = SentBlobOf(source);
    const auto bytes = static_cast<uint64_t>(source.numel()) * source.element_size();
    return id != 0 && add_known_(sink_->ctx, id, bytes) == id ? id : 0;
  }
  uint64_t AddReusable(std::string_view bytes, const at::Tensor& source) override {
    const uint64_t id = sink_->add_reusable(sink_->ctx, bytes.data(), bytes.size());
    if (source.defined()) RememberSentBlob(source, id);
    return id;
  }

 private:
  const parity_blob_sink* sink_;
  uint64_t (*add_known_)(void*, uint64_t, uint64_t) = nullptr;
};

// After the wait for the device: the snapshots the device found bit-identical to an earlier one
// take that one's host copy (where it is still kept); the rest are copied out.
void ResolveHostCandidates(TorchValues& call) {
  if (call.host_candidates.empty()) return;
  at::Tensor changed;  // the call's flags, out of the device in one copy
  try {
    std::vector<at::Tensor> flags;
    for (const TorchValues::HostCandidate& c : call.host_candidates) flags.push_back(c.changed);
    changed = at::stack(flags).to(at::kCPU);
  } catch (const std::exception&) {
    call.host_candidates.clear();  // not proven: copied out
    return;
  }
  const auto* differs = changed.data_ptr<bool>();
  for (std::size_t k = 0; k < call.host_candidates.size(); ++k) {
    const TorchValues::HostCandidate& c = call.host_candidates[k];
    if (differs[k]) {
      NoteDeviceSnapshotChanged();
      continue;
    }
    if (at::Tensor host = AdoptHostCopy(c.snapshot, c.earlier); host.defined()) {
      call.host_copies.emplace_back(c.snapshot, std::move(host));
    }
  }
  call.host_candidates.clear();
}

// Waits, on this (the sender's) thread, for the call's device-side snapshots, then copies them
// to the host.
void CopyToHost(TorchValues& call) {
  if (!call.device_ready) return;
  try {
    // The sender's stream on that device waits for the training stream's event; the blocking
    // copy to the host below then runs after the snapshots.
    const c10::Event& ready = *call.device_ready;
    c10::impl::VirtualGuardImpl impl(ready.device_type());
    ready.block(impl.getStream(c10::Device(ready.device_type(), ready.device_index())));
    ResolveHostCandidates(call);
    for (auto* values : {&call.inputs, &call.outputs}) {
      for (c10::IValue& v : *values) v = ToHost(v, call);
    }
    call.host_copies.clear();
  } catch (const std::exception& e) {
    const std::string line = "device copy failed for " + call.op + ": " + e.what();
    parity_log(PARITY_LOG_WARNING, line.c_str());
  }
  call.device_ready.reset();
}

void CopyError(const std::string& message, char* error, size_t size) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(message.size(), size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace

c10::IValue ToHost(const c10::IValue& v) {
  return common::MapLeaves(v, [](const c10::IValue& leaf) {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& t = leaf.toTensor();
    // A snapshot with a host copy kept (an earlier call's, proven identical) brings it.
    return t.defined() && !t.device().is_cpu() && !t.is_meta() ? c10::IValue(HostCopyOf(t)) : leaf;
  });
}

c10::IValue ToHost(const c10::IValue& v, const TorchValues& call) {
  if (call.host_copies.empty()) return ToHost(v);
  return common::MapLeaves(v, [&call](const c10::IValue& leaf) {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& t = leaf.toTensor();
    if (!t.defined() || t.device().is_cpu() || t.is_meta()) return leaf;
    for (const auto& [snapshot, host] : call.host_copies) {
      if (snapshot.is_same(t)) return c10::IValue(host);
    }
    return c10::IValue(HostCopyOf(t));
  });
}

int EncodeTorchValues(TorchValues& call, const parity_encode_limits& limits,
                      const parity_blob_sink* sink, std::string* out, std::string* error) {
  CopyToHost(call);
  ResolveInputWrites(call);  // after the wait for the device's copies, where there are any
  SinkAdapter adapter(sink, limits);
  common::EncodeOptions opts;
  opts.max_inline_tensor_bytes = limits.max_inline_tensor_bytes;
  opts.max_tensor_bytes = limits.max_tensor_bytes;
  opts.blob_sink = sink != nullptr ? &adapter : nullptr;
  opts.reuse_min_bytes = limits.reuse_min_bytes;
  opts.compute_crc32c = limits.checksum != 0;
  std::vector<int32_t> accepted;
  if (limits.accepted_dtypes != nullptr) {
    accepted.assign(limits.accepted_dtypes, limits.accepted_dtypes + limits.accepted_dtype_count);
    opts.accepted_dtypes = &accepted;
  }
  // The schema's argument types tell an int that is really a dtype, layout or memory format.
  const c10::FunctionSchema* schema = nullptr;
  auto handle = c10::Dispatcher::singleton().findSchema(c10::OperatorName(call.op, call.overload));
  if (handle) schema = &handle->schema();
  wire::Message fields;  // the ApiCall's inputs and outputs
  std::vector<c10::IValue> keep_alive;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const c10::Type* hint = schema && i < schema->arguments().size()
                                ? schema->arguments()[i].real_type().get()
                                : nullptr;
    common::EncodeError e =
        common::EncodeValueWire(call.inputs[i], hint, opts, "inputs[" + std::to_string(i) + "]",
                                &fields.Sub(wire::kApiCallInputs), &keep_alive);
    if (!e.ok()) {
      *error = e.message;
      return e.code;
    }
  }
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    common::EncodeError e = common::EncodeValueWire(
        call.outputs[i], nullptr, opts, "outputs[" + std::to_string(i) + "]",
        &fields.Sub(wire::kApiCallOutputs), &keep_alive);
    if (!e.ok()) {
      *error = e.message;
      return e.code;
    }
  }
  EncodeInputWrites(call, &fields);
  out->clear();
  fields.AppendTo(out);
  return 0;
}

namespace {

// TorchValues the transport released, emptied, for NewTorchValues (the training threads take,
// the sender thread gives back). Bounded: past kMaxPooledValues they are deleted.
constexpr std::size_t kMaxPooledValues = 256;
std::mutex g_values_mu;
std::vector<TorchValues*>& PooledValues() {
  static auto* pool = new std::vector<TorchValues*>();  // outlives every call (never destroyed)
  return *pool;
}

void ReleaseTorchValues(TorchValues* v) {
  // Emptied outside the lock (the tensors' release may free their buffers); strings and vectors
  // keep their capacity.
  v->op.clear();
  v->overload.clear();
  v->inputs.clear();
  v->outputs.clear();
  v->bytes = 0;
  v->snapshot_seconds = 0;
  v->device_ready.reset();
  v->accelerator.reset();
  v->input_writes.clear();
  v->unchecked_writes.clear();
  v->host_candidates.clear();
  v->host_copies.clear();
  {
    std::lock_guard<std::mutex> lock(g_values_mu);
    std::vector<TorchValues*>& pool = PooledValues();
    if (pool.size() < kMaxPooledValues) {
      if (pool.capacity() == 0) pool.reserve(kMaxPooledValues);
      pool.push_back(v);
      return;
    }
  }
  delete v;
}

}  // namespace

std::unique_ptr<TorchValues> NewTorchValues() {
  {
    std::lock_guard<std::mutex> lock(g_values_mu);
    std::vector<TorchValues*>& pool = PooledValues();
    if (!pool.empty()) {
      TorchValues* v = pool.back();
      pool.pop_back();
      return std::unique_ptr<TorchValues>(v);
    }
  }
  return std::make_unique<TorchValues>();
}

parity_values MakeParityValues(std::unique_ptr<TorchValues> values) {
  parity_values v{};
  v.size = sizeof(v);
  v.bytes = values->bytes;
  v.snapshot_seconds = values->snapshot_seconds;
  v.ctx = values.release();
  v.encode = [](void* ctx, const parity_encode_limits* limits, const parity_blob_sink* sink,
                parity_bytes* out, char* error, size_t error_size) -> int {
    try {
      auto bytes = std::make_unique<std::string>();
      std::string why;
      const int code =
          EncodeTorchValues(*static_cast<TorchValues*>(ctx), *limits, sink, bytes.get(), &why);
      if (code != 0) {
        CopyError(why, error, error_size);
        return code;
      }
      out->data = bytes->data();
      out->size = bytes->size();
      out->owner = bytes.release();
      out->release = [](void* owner) { delete static_cast<std::string*>(owner); };
      // The snapshots are no longer needed: back to the pool now, not when gRPC is done.
      TorchValues* t = static_cast<TorchValues*>(ctx);
      t->inputs.clear();
      t->outputs.clear();
      return 0;
    } catch (const std::exception& e) {
      CopyError(std::string("encoding failed: ") + e.what(), error, error_size);
      return 13;
    }
  };
  v.release = [](void* ctx) { ReleaseTorchValues(static_cast<TorchValues*>(ctx)); };
  return v;
}

}  // namespace parity::agent
