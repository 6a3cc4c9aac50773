// Read-only arguments a call must leave as they were (ApiCall.inputs_written,
// parity.detect_input_writes): at entry the agent notes each read-only tensor argument of a call
// it sends with its values, each member of a read-only tensor list (the `other` of an
// optimizer's _foreach_ ops), and, for an argument the call may write that is a view of a larger
// storage (`q = qkv[:, :64]; q.mul_(s)`), the storage around the view (all of it up to
// kViewCheckBytes, else the view's span and kViewMarginBytes either side, else nothing, said in
// ApiCall.unchecked_writes). At exit it compares each with its copy at entry, bit for bit (a
// memcmp on the host; on an accelerator, a second copy queued on the call's stream, compared by
// the sender on the host with the first); around a view, only the elements outside it. A kernel
// that uses an input as scratch, or writes past the view it was given, passes its own
// comparison and corrupts what autograd saved: only this sees it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/torch/torch_values.h"
#include "common/torch/torch_pch.h"
#include "common/wire/proto_writer.h"

namespace parity::agent {

// Around a written view, at most this many bytes of its storage are compared per argument (the
// whole storage when it fits, else the view's span and kViewMarginBytes on either side); more is
// not compared, and ApiCall.unchecked_writes says so.
inline constexpr uint64_t kViewCheckBytes = uint64_t{16} << 20;
inline constexpr uint64_t kViewMarginBytes = 4096;

// A tensor the call must leave as it was, referenced (not copied) from entry to exit.
struct WatchedInput {
  uint32_t index = 0;
  std::string name;     // the argument's; "{name} (outside its view)" around a written view
  at::Tensor live;      // the argument, a member of it, or the storage around a view (flat)
  int64_t member = -1;  // position in a tensor list argument
  int64_t elements =
      0;              // the argument's elements (a list: all members'; around a view: outside it)
  at::Tensor before;  // around a view: its copy at entry (else the call's snapshot is the copy)
  at::Tensor inside;  // around a view: which of `live`'s elements are the view's (host bool)
};

// What a call must leave unchanged: the read-only tensor arguments of `schema` among the first
// `sent` of `inputs` worth comparing (not written by the schema (`(a!)`), not sharing memory with
// an argument that is, not the running statistics torch's batch norms update without an
// annotation, not empty), tensor lists member by member, and the storage around each written
// view; what it cannot compare within the budget is appended to `unchecked`.
// Fills `watched` (cleared first: its capacity reused call after call).
void WatchReadOnlyInputs(const c10::FunctionSchema& schema, c10::ArrayRef<const c10::IValue> inputs,
                         std::size_t sent, std::vector<WatchedInput>* watched,
                         std::vector<std::string>* unchecked);

// After the call: each watched argument against its snapshot (`values.inputs[index]`, taken at
// entry). On the host, compared now; on an accelerator, copied on its current stream (call
// before MarkDeviceReady, so the sender's wait covers the copy). Never throws: an argument that
// cannot be compared is left out (logged once).
void CompareWatchedInputs(const std::vector<WatchedInput>& watched, TorchValues& values);

// The sender's side, after the wait for the device's copies: compares the accelerator
// arguments' copies at exit with their snapshots.
void ResolveInputWrites(TorchValues& values);

// The ApiCall's inputs_written fields, one per argument that changed (a list's members summed),
// and its unchecked_writes.
void EncodeInputWrites(const TorchValues& values, wire::Message* api_call_fields);

}  // namespace parity::agent
