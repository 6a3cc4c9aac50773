#include "agent/call_inputs.h"

#include <ATen/core/function_schema.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "agent/snapshot.h"
#include "common/torch/ivalue_walk.h"

namespace parity::agent {
namespace {

// Whether `v` is the schema default `d` (the kinds defaults have; a tensor never is).
bool IsDefault(const c10::IValue& v, const c10::IValue& d) {
  if (d.isNone()) return v.isNone();
  if (v.isInt() && d.isInt()) return v.toInt() == d.toInt();
  if (v.isDouble() && d.isDouble()) return v.toDouble() == d.toDouble();
  if (v.isBool() && d.isBool()) return v.toBool() == d.toBool();
  if (v.isString() && d.isString()) return v.toStringRef() == d.toStringRef();
  if (v.isIntList() && d.isIntList()) return v.toIntVector() == d.toIntVector();
  return false;
}

}  // namespace

// A call on tensors without data of their own computes nothing: torch.compile tracing the
// program with fake tensors (its kernels run later, compiled), meta tensors, functionalization.
// Nor does a call made while a Python dispatch mode (FakeTensorMode, a tracer), functorch's
// transforms or functionalization are active: the agent's own copies would dispatch into them.
// Not captured, not counted: reading such a tensor's data crashed the training (SIGSEGV), and
// copying inside a mode left a Python error behind (torch.compile failed).
bool Traced(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::DispatchKey mode :
       {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
        c10::DispatchKey::FuncTorchDynamicLayerFrontMode, c10::DispatchKey::Functionalize}) {
    if (c10::impl::tls_is_dispatch_key_included(mode)) return true;
  }
  bool traced = false;
  for (const c10::IValue& v : inputs) {
    common::ForEachLeaf(v, [&traced](const c10::IValue& leaf) {
      if (!traced && leaf.isTensor() && leaf.toTensor().defined()) {
        traced = !HasData(leaf.toTensor());
      }
    });
    if (traced) return true;
  }
  return false;
}

// How many of the call's arguments are sent: trailing ones equal to their schema's default are
// left out, as the wire allows (the server appends its own schema's defaults). A newer torch adds
// arguments at the end with a default (_foreach_norm's dtype=None in torch 2.x): left at it, they
// are not sent, and a server of an older torch replays the call with the schema it has.
std::size_t SentArguments(const c10::FunctionSchema& schema,
                          c10::ArrayRef<const c10::IValue> inputs) {
  std::size_t n = inputs.size();
  if (n > schema.arguments().size()) return n;
  while (n > 0) {
    const c10::Argument& a = schema.arguments()[n - 1];
    const c10::optional<c10::IValue>& d = a.default_value();
    if (!d || a.is_out() || !IsDefault(inputs[n - 1], *d)) break;
    --n;
  }
  return n;
}

}  // namespace parity::agent
