#include "agent/torch/call_inputs.h"

#include <charconv>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "agent/torch/snapshot.h"
#include "common/torch/generator_read.h"
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

// The device type of the call's first defined tensor; CPU when it has none.
c10::DeviceType DeviceTypeOf(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& v : inputs) {
    std::optional<c10::DeviceType> found;
    common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
      if (!found && leaf.isTensor() && leaf.toTensor().defined()) {
        found = leaf.toTensor().device().type();
      }
    });
    if (found) return *found;
  }
  return c10::DeviceType::CPU;
}

// The generator a random op is about to draw from: its explicit `generator` argument, else the
// default generator of its device (a `device` argument of a factory op, else its first tensor's
// device, else the CPU).
std::optional<at::Generator> GeneratorOf(c10::ArrayRef<const c10::IValue> inputs) {
  std::optional<c10::Device> device;
  for (const c10::IValue& v : inputs) {
    if (v.isGenerator()) return v.toGenerator();
    if (!device && v.isDevice()) device = v.toDevice();
  }
  if (!device) {
    for (const c10::IValue& v : inputs) {
      common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
        if (!device && leaf.isTensor() && leaf.toTensor().defined()) {
          device = leaf.toTensor().device();
        }
      });
    }
  }
  return common::DefaultGeneratorOf(device.value_or(c10::kCPU), nullptr);
}

// op, overload, then dtype and shape of each tensor argument: what the per-signature budget
// counts.
void Signature(const std::string& op, const std::string& overload,
               c10::ArrayRef<const c10::IValue> inputs, std::string* out) {
  // Written into `out`, whose buffer the caller keeps from call to call: no allocation a call.
  std::string& s = *out;
  s.assign(op).append(".").append(overload);
  char number[24];
  const auto append = [&s, &number](int64_t v, char after) {
    const auto end = std::to_chars(number, number + sizeof(number), v).ptr;
    s.append(number, end);
    s.push_back(after);
  };
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      s.push_back('|');
      append(static_cast<int>(t.scalar_type()), ':');
      for (int64_t d : t.sizes()) append(d, ',');
    } else if (v.isScalar()) {
      s.append("|s");
    }
  }
}

// Whether an op's schema takes a communicator: a string argument named hcom, or group...
// (torch_npu's communication-fused ops: npu_mm_all_reduce_base(Tensor, Tensor, str hcom, ...),
// npu_all_gather_base_mm, npu_mm_reduce_scatter_base, the MoE dispatch/combine ops' group_ep).
// aten's schemas take none (its collectives are c10d ops, known by name): those, nearly every
// call, cost a prefix compare; any other op's schema is read once per thread.
bool Communicates(const std::string& op, const std::string& overload) {
  if (op.compare(0, 6, "aten::") == 0) return false;
  thread_local std::unordered_map<std::string, bool> known;
  thread_local std::string key;  // its buffer reused call after call
  key.assign(op).append(".").append(overload);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool communicates = false;
  if (auto handle = c10::Dispatcher::singleton().findSchema({op, overload})) {
    for (const c10::Argument& a : handle->schema().arguments()) {
      const std::string& n = a.name();
      const bool named = n == "hcom" || n.rfind("group", 0) == 0 || n == "hcomm_info";
      if (named && a.type()->kind() == c10::TypeKind::StringType) communicates = true;
    }
  }
  known.emplace(key, communicates);
  return communicates;
}

}  // namespace parity::agent
