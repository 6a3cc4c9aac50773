// Snapshots of tensors that did not change, made once (issue 54), and only where that is proven
// (issue 64: a shortcut on the verdict path is exact or absent). Parameters between optimizer
// steps and activations that the next op (or the backward) reads again are the same tensors call
// after call:
// - on the host, a tensor with the storage, offset, sizes, strides and dtype of one snapshotted
//   earlier, whose bits all still equal that snapshot's (a whole-tensor comparison, SameBits),
//   gets that snapshot again, with no copy, and is sent by the blob id of the earlier send;
// - on an accelerator, every call still gets a copy made on the device (queued on its stream, so
//   the training thread never waits), and the device itself compares that copy bit for bit with
//   the earlier snapshot; the sender, after its wait for the device, gives the call the earlier
//   snapshot's host copy instead of a second copy out of the device only when no bit differed.
// So a write no schema, version counter or hook saw (a kernel scribbling over a tensor it should
// only read, a write through .data or from numpy) never hands a later call stale inputs. Every
// top-level operator that writes a tensor forgets its snapshots (the hook tells the cache,
// captured or not), and a moved version counter too: both only save a comparison that would fail.
// Bounded: least recently used snapshots are let go past `max_bytes`. Thread-safe (training
// threads and the sender thread).
#pragma once

#include <cstdint>

#include <ATen/core/operator_name.h>
#include <ATen/record_function.h>

#include "common/torch/torch_pch.h"

namespace parity::agent {

// Smaller tensors are copied every time: a copy of a few kilobytes costs less than the lookup.
inline constexpr uint64_t kSnapshotCacheMinBytes = 4096;

// The snapshot of host tensor `t` made earlier, if every bit of `t` still equals it (compared
// whole, here); else an undefined tensor. Undefined for a device tensor (EarlierDeviceSnapshot).
at::Tensor CachedSnapshot(const at::Tensor& t);
// The snapshot of device tensor `t` made earlier (same storage, view and version, not forgotten),
// for the device to compare with this call's copy; undefined if none.
at::Tensor EarlierDeviceSnapshot(const at::Tensor& t);
// Remembers `snapshot` as the copy of `t` (a tensor of at least kSnapshotCacheMinBytes).
void RememberSnapshot(const at::Tensor& t, const at::Tensor& snapshot);
// The host copy of a device snapshot: the one kept for it (made for an earlier call, or adopted
// by AdoptHostCopy), else a new copy (kept with the snapshot when the cache holds it).
at::Tensor HostCopyOf(const at::Tensor& snapshot);
// Device snapshot `snapshot` was found bit-identical to `earlier` by the device: `earlier`'s host
// copy, when one is kept, is now `snapshot`'s too, and returned; else undefined (copy it out).
at::Tensor AdoptHostCopy(const at::Tensor& snapshot, const at::Tensor& earlier);
// A device comparison found a snapshot's tensor changed behind everything the hook sees.
void NoteDeviceSnapshotChanged();

// `t`'s memory is written (an operator whose schema marks the argument written, a collective):
// every snapshot over its storage, through any view, is let go. The version counter alone is
// not enough: libtorch 1.13's _foreach_ ops, which optimizers run, write without moving it.
void ForgetSnapshotsOf(const at::Tensor& t);
// ForgetSnapshotsOf for each tensor a call of `op` with `inputs` writes: the arguments its schema
// marks written; any tensor given to a collective (c10d::), or to an op without a schema here.
// `schema`: the op's, when the caller has it (else looked up).
void ForgetWrittenArguments(const c10::OperatorName& op, const c10::FunctionSchema* schema,
                            c10::ArrayRef<const c10::IValue> inputs);
// Whether any snapshot is kept (a hint, read without the lock): while none is, no call's writes
// need telling.
bool SnapshotCacheHoldsAny();
// ForgetWrittenArguments for the operator call `fn` (a dispatcher op) when it goes out of scope,
// unless the cache holds nothing; never throws. (`fn.operator_name()` is a copy: read when it is
// used, not kept.)
class ForgetWrittenOnReturn {
 public:
  explicit ForgetWrittenOnReturn(const at::RecordFunction& fn) : fn_(fn) {}
  // The op's schema, when the hook looked it up anyway: not looked up twice.
  void set_schema(const c10::FunctionSchema* schema) { schema_ = schema; }
  ~ForgetWrittenOnReturn() {
    try {
      if (!SnapshotCacheHoldsAny()) return;
      if (const auto op = fn_.operator_name()) ForgetWrittenArguments(*op, schema_, fn_.inputs());
    } catch (...) {  // a destructor: nothing escapes
    }
  }
  ForgetWrittenOnReturn(const ForgetWrittenOnReturn&) = delete;
  ForgetWrittenOnReturn& operator=(const ForgetWrittenOnReturn&) = delete;

 private:
  const at::RecordFunction& fn_;
  const c10::FunctionSchema* schema_ = nullptr;
};

// Lets every snapshot go (the hook was off: writes went unseen).
void ClearSnapshotCache();

// Keeps at most `max_bytes` of snapshots (their host copies not counted twice for a host
// tensor); 0 turns the cache off and lets every snapshot go.
void ConfigureSnapshotCache(uint64_t max_bytes);

// The blob id a host snapshot's bytes were sent under (the transport's add_reusable), 0 if none
// or the snapshot is gone; a snapshot given again is named by it without its bytes being read.
uint64_t SentBlobOf(const at::Tensor& host_snapshot);
void RememberSentBlob(const at::Tensor& host_snapshot, uint64_t blob_id);

struct SnapshotCacheStats {
  uint64_t hits = 0, hit_bytes = 0;        // host snapshots given again instead of copied
  uint64_t compared_bytes = 0;             // host bytes compared to prove (or refute) a hit
  uint64_t host_hits = 0, host_bytes = 0;  // device snapshots whose host copy was given again
  uint64_t held_bytes = 0;
  uint64_t forgotten = 0;    // snapshots let go because their tensor was written
  uint64_t changed = 0;      // snapshots found changed by the comparison, the hook unaware
  uint64_t blobs_named = 0;  // payloads named by the blob id of an earlier call, unread
};
SnapshotCacheStats GetSnapshotCacheStats();

}  // namespace parity::agent
