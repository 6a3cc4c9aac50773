// Snapshots of tensors that did not change, made once (issue 54). Parameters between optimizer
// steps and activations that the next op (or the backward) reads again are the same tensors call
// after call: a tensor with the storage, offset, sizes, strides, dtype and version counter of one
// snapshotted earlier gets that snapshot again, with no copy on the training thread, and, on an
// accelerator, no second copy out of the device on the sender thread (its host copy is kept with
// it). Every top-level operator that writes a tensor forgets its snapshots (the hook tells the
// cache, captured or not). A host tensor is also compared at 64 evenly spaced elements with its
// snapshot, so that a write that bypassed the version counter (through `.data`, or a kernel that
// does not bump it) is seen; a device tensor is not read (reading it would wait for the device), so
// there the writes the hook sees and the version counter are trusted. Bounded: least recently used
// snapshots are let go past `max_bytes`. Thread-safe (training threads and the sender thread).
#pragma once

#include <cstdint>

#include <ATen/core/operator_name.h>
#include <ATen/record_function.h>

#include "common/torch/torch_pch.h"

namespace parity::agent {

// Smaller tensors are copied every time: a copy of a few kilobytes costs less than the lookup.
inline constexpr uint64_t kSnapshotCacheMinBytes = 4096;

// The snapshot of `t` made earlier, if `t` is unchanged since; else an undefined tensor.
// Unchanged: no operator that writes its memory ran since (ForgetSnapshotsOf), its version
// counter did not move, and, on the host, 64 evenly spaced elements still equal the snapshot's.
// `host`, when given, receives the host copy kept with a device snapshot, if one was made.
at::Tensor CachedSnapshot(const at::Tensor& t, at::Tensor* host = nullptr);
// Remembers `snapshot` as the copy of `t` (a tensor of at least kSnapshotCacheMinBytes).
void RememberSnapshot(const at::Tensor& t, const at::Tensor& snapshot);
// The host copy of a device snapshot: the one made for an earlier call when `snapshot` came from
// the cache, else a new copy (kept with the snapshot when the cache holds it).
at::Tensor HostCopyOf(const at::Tensor& snapshot);

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
  uint64_t hits = 0, hit_bytes = 0;        // snapshots given again instead of copied
  uint64_t host_hits = 0, host_bytes = 0;  // device snapshots whose host copy was given again
  uint64_t held_bytes = 0;
  uint64_t forgotten = 0;    // snapshots let go because their tensor was written
  uint64_t blobs_named = 0;  // payloads named by the blob id of an earlier call, unread
};
SnapshotCacheStats GetSnapshotCacheStats();

}  // namespace parity::agent
