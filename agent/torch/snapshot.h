// A call's values copied on the training thread, so that the training cannot change them after
// the call (in-place ops, later steps): host tensors into pooled buffers, accelerator tensors on
// their device, queued on the training's stream. The sender copies those to the host later
// (agent/torch/torch_values.h).
#pragma once

#include <cstdint>

#include "agent/torch/torch_values.h"
#include "common/torch/torch_pch.h"

namespace parity::agent {

// The bytes of every defined tensor in `v` (lists and tuples included).
uint64_t ValueBytes(const c10::IValue& v);

// A copy of `v` the training cannot change afterwards; notes in `call` the first accelerator
// among its tensors. Strings are copied deep; a generator becomes None (a random op's state
// travels in ApiCall.generator).
// Whether `t` holds data of its own that can be copied: not a meta tensor, nor a tensor that
// stands for one while a program is traced (torch.compile's fake tensors and every other tensor
// subclass dispatched to Python, functionalization's wrappers).
bool HasData(const at::Tensor& t);

c10::IValue Snapshot(const c10::IValue& v, TorchValues& call);

// Records, on the current stream of the call's accelerator, the event after which its device
// snapshots are complete. A device without events gets host copies now (synchronously).
void MarkDeviceReady(TorchValues& call);

// Keeps at most `max_cached_bytes` of free host snapshot buffers for reuse, and as much of the
// snapshots of tensors that may be met again unchanged (agent/torch/snapshot_cache.h); 0 turns
// both off (every copy allocates, every tensor is copied at every call). Takes effect for the
// next copies.
void ConfigureSnapshotPool(uint64_t max_cached_bytes);

}  // namespace parity::agent
