// Stages 1-3 of a check: admit the call's strings, resolve its operator, decode its values.
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "common/base/text.h"
#include "common/torch/torch_pch.h"
#include "common/wire/dtype.h"
#include "server/replay/call_checker.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

// Every operator name the dispatcher knows, to tell "unknown op" from "unknown overload". Built
// once: a reference library loaded later would need a fresh set (they load at start-up).
bool OpNameKnown(absl::string_view name) {
  static const auto* names = [] {
    auto* set = new std::unordered_set<std::string>();
    for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
      set->insert(op.name);
    }
    return set;
  }();
  return names->count(std::string(name)) > 0;
}

}  // namespace

std::vector<std::string> KnownOperatorNames() {
  std::vector<std::string> names;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    names.push_back(op.name);
  }
  return names;
}

absl::Status ValidateCallStrings(const common::CallIdentity& call) {
  static const common::CallIdentity::Generator kNone;
  const common::CallIdentity::Generator& g = call.generator ? *call.generator : kNone;
  const std::tuple<const char*, const std::string*, std::size_t> fields[] = {
      {"op_name", &call.op_name, common::kMaxNameBytes},
      {"overload", &call.overload, common::kMaxNameBytes},
      {"forward_op_name", &call.forward_op_name, common::kMaxNameBytes},
      {"forward_overload", &call.forward_overload, common::kMaxNameBytes},
      {"autograd_node", &call.autograd_node, common::kMaxNameBytes},
      {"module_path", &call.module_path, common::kMaxModulePathBytes},
      {"skip_reason", &call.skip_reason, common::kMaxSkipReasonBytes},
      {"generator.device_type", &g.device_type, common::kMaxNameBytes},
      {"generator.torch_version", &g.torch_version, common::kMaxNameBytes},
      {"generator.state", &g.state, common::kMaxGeneratorStateBytes},
      {"api", &call.api, common::kMaxNameBytes},
  };
  for (const auto& [name, value, cap] : fields) {
    if (value->size() > cap) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ApiCall.", name, ": ", value->size(), " bytes, at most ", cap));
    }
  }
  // Names end up in the result files' rows, logs and metric labels: no operator is named with
  // control characters, so a name holding one is malformed.
  for (const auto& [name, value, cap] : fields) {
    if (cap == common::kMaxNameBytes && common::EscapeControl(*value) != *value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ApiCall.", name, ": \"", common::EscapeControl(*value), "\" holds control characters"));
    }
  }
  // The generator's kind decides its replay: a number that is no GeneratorDevice is malformed.
  if (g.device < wire::kGeneratorUnspecified || g.device > wire::kGeneratorOther) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApiCall.generator.device: ", static_cast<int>(g.device),
                     " is not a parity.v1.GeneratorDevice"));
  }
  // The autocast dtype is replayed: a number that is no DType is malformed, as in a tensor.
  if (call.autocast_dtype != wire::kDTypeUnspecified &&
      !common::IsKnownDType(call.autocast_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApiCall.autocast_dtype: ", static_cast<int>(call.autocast_dtype),
                     " is not a parity.v1.DType"));
  }
  return absl::OkStatus();
}

absl::StatusOr<c10::OperatorHandle> ResolveOp(absl::string_view name, absl::string_view overload) {
  c10::optional<c10::OperatorHandle> op =
      c10::Dispatcher::singleton().findSchema({std::string(name), std::string(overload)});
  if (op) return *op;
  return absl::UnimplementedError(
      OpNameKnown(name)
          ? absl::StrCat("operator ", name, " has no overload \"", overload,
                         "\" in the bench's libtorch")
          : absl::StrCat("unknown operator \"", name,
                         "\": the bench's libtorch does not have it and no reference library "
                         "registers it"));
}

// `Scalar[]` or `Scalar[]?`.
bool IsNumberList(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (t->kind() == c10::TypeKind::OptionalType)
    t = t->castRaw<c10::OptionalType>()->getElementType();
  return t->kind() == c10::TypeKind::ListType &&
         t->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::NumberType;
}

absl::Status NormalizeArguments(const c10::FunctionSchema& schema, Stack& inputs) {
  const auto& args = schema.arguments();
  if (inputs.size() > args.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the call has ", inputs.size(), " arguments, ",
                                                   toString(schema), " takes ", args.size()));
  }
  for (std::size_t i = inputs.size(); i < args.size(); ++i) {
    if (!args[i].default_value()) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i, " (", args[i].name(), ") of ",
                                                     toString(schema),
                                                     " is missing and has no default"));
    }
  }
  // An absent optional tensor arrives as an undefined tensor (that is how libtorch hands
  // `Tensor?` to an observer): the schema wants None there. A plain `Tensor` argument may be
  // undefined too (autograd passes undefined gradients): the kernel takes it as it is, but the
  // schema's type check cannot look at it, so it checks a placeholder in its place.
  std::vector<std::size_t> undefined;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    // `Scalar[]` (AdamW's `_foreach_div_.ScalarList`): a list of floats or ints on the wire, a
    // list of numbers for the schema.
    if ((inputs[i].isDoubleList() || inputs[i].isIntList()) && IsNumberList(args[i].type())) {
      c10::impl::GenericList numbers(c10::NumberType::get());
      for (const c10::IValue& v : inputs[i].toListRef()) numbers.push_back(v);
      inputs[i] = c10::IValue(std::move(numbers));
      continue;
    }
    if (!inputs[i].isTensor() || inputs[i].toTensor().defined()) continue;
    if (args[i].type()->kind() == c10::TypeKind::OptionalType) {
      inputs[i] = c10::IValue();
    } else {
      undefined.push_back(i);
      inputs[i] = at::empty({0});
    }
  }
  try {
    schema.checkAndNormalizeInputs(inputs, {});  // also appends the defaults
    for (std::size_t i : undefined) inputs[i] = at::Tensor();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("arguments do not match ", toString(schema), ": ", ErrorText(e)));
  }
  return absl::OkStatus();
}

namespace {

// The release forms of `schema`'s operator (its overloads named release_*, or X_release_* for an
// overload X), looked up in the dispatcher once per operator: most have none, and then a call's
// arguments are normalised in place with nothing copied.
const std::vector<c10::OperatorHandle>& ReleaseForms(const c10::FunctionSchema& schema) {
  static absl::Mutex mu;
  static auto* forms = new std::unordered_map<std::string, std::vector<c10::OperatorHandle>>();
  const std::string key = absl::StrCat(schema.name(), ".", schema.overload_name());
  absl::MutexLock lock(&mu);
  auto [it, added] = forms->try_emplace(key);
  if (added) {
    const std::string prefix =
        schema.overload_name().empty() ? "release_" : schema.overload_name() + "_release_";
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      if (name.name != schema.name() || name.overload_name.rfind(prefix, 0) != 0) continue;
      c10::optional<c10::OperatorHandle> form = c10::Dispatcher::singleton().findSchema(name);
      if (form && form->hasSchema()) it->second.push_back(*form);
    }
  }
  return it->second;  // a node of the map: it stays where it is
}

}  // namespace

absl::StatusOr<std::optional<c10::OperatorHandle>> NormalizeForSomeRelease(
    const c10::FunctionSchema& schema, Stack& inputs) {
  const std::vector<c10::OperatorHandle>& forms = ReleaseForms(schema);
  if (forms.empty()) {
    PARITY_RETURN_IF_ERROR(NormalizeArguments(schema, inputs));
    return std::optional<c10::OperatorHandle>();
  }
  Stack original = inputs;
  absl::Status refused = NormalizeArguments(schema, inputs);
  if (refused.ok()) return std::optional<c10::OperatorHandle>();
  for (const c10::OperatorHandle& form : forms) {
    Stack attempt = original;
    if (NormalizeArguments(form.schema(), attempt).ok()) {
      inputs = std::move(attempt);
      return std::optional<c10::OperatorHandle>(form);
    }
  }
  inputs = std::move(original);
  return refused;
}

absl::StatusOr<DecodedCall> DecodeCall(const ServerCall& call, const c10::FunctionSchema& schema,
                                       const common::DecodeLimits& limits,
                                       const common::BlobSource* blobs, bool pinned_inputs) {
  PARITY_ASSIGN_OR_RETURN(MessageValues values, DecodeValues(call, limits, blobs, pinned_inputs));
  DecodedCall d;
  d.inputs = std::move(values.inputs);
  d.outputs = std::move(values.outputs);
  d.output_form = std::move(values.output_form);
  d.inputs_contiguous = values.inputs_contiguous;
  // Argument types must fit the schema (or one of its release forms) before anything is
  // dispatched, and the stack must hold every argument (a kernel reads its arguments from fixed
  // stack positions).
  PARITY_ASSIGN_OR_RETURN(d.replay_as, NormalizeForSomeRelease(schema, d.inputs));
  return d;
}

absl::StatusOr<DecodedCall> DecodedFromValues(const c10::FunctionSchema& schema, Stack inputs,
                                              Stack outputs) {
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < inputs.size() && i < args.size(); ++i) {
    // torch.save keeps an undefined tensor as None; a plain Tensor argument takes it undefined.
    if (inputs[i].isNone() && args[i].type()->kind() == c10::TypeKind::TensorType) {
      inputs[i] = at::Tensor();
    }
  }
  DecodedCall d;
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.output_form.resize(d.outputs.size());
  PARITY_ASSIGN_OR_RETURN(d.replay_as, NormalizeForSomeRelease(schema, d.inputs));
  return d;
}

}  // namespace parity::server
