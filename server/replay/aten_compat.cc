#include "server/replay/aten_compat.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "oplib/support/boxed_kernel.h"
#include "server/replay/sdpa_compat.h"

namespace parity::server {
namespace {

using oplib::Args;
using oplib::Stack;

// A foreach operator and the per-tensor operator it applies to each element: element i of every
// list argument, the other arguments as they are. Torch 2.x's AdamW and SGD (foreach, their
// default) call the in-place ones; torch 1.13 has neither _foreach_lerp_ nor the Tensor overloads
// (found by the torch matrix: scripts/torch-matrix.sh). A `Tensor scalars` argument holds one
// value per tensor.
struct ForeachOp {
  const char* schema;  // as torch 2.x declares it, without its namespace (aten)
  const char* element_op;
  const char* element_overload;
};
constexpr ForeachOp kForeachOps[] = {
    {"_foreach_mul_.Tensor(Tensor(a!)[] self, Tensor other) -> ()", "aten::mul_", "Tensor"},
    {"_foreach_div_.Tensor(Tensor(a!)[] self, Tensor other) -> ()", "aten::div_", "Tensor"},
    {"_foreach_lerp_.Scalar(Tensor(a!)[] self, Tensor[] tensors1, Scalar weight) -> ()",
     "aten::lerp_", "Scalar"},
    {"_foreach_lerp_.List(Tensor(a!)[] self, Tensor[] tensors1, Tensor[] weights) -> ()",
     "aten::lerp_", "Tensor"},
    {"_foreach_add_.Tensor(Tensor(a!)[] self, Tensor other, *, Scalar alpha=1) -> ()", "aten::add_",
     "Tensor"},
    {"_foreach_addcmul_.Tensor(Tensor(a!)[] self, Tensor[] tensor1, Tensor[] tensor2, "
     "Tensor scalars) -> ()",
     "aten::addcmul_", ""},
    {"_foreach_addcdiv_.Tensor(Tensor(a!)[] self, Tensor[] tensor1, Tensor[] tensor2, "
     "Tensor scalars) -> ()",
     "aten::addcdiv_", ""},
    {"_foreach_mul.Tensor(Tensor[] self, Tensor other) -> Tensor[]", "aten::mul", "Tensor"},
    {"_foreach_div.Tensor(Tensor[] self, Tensor other) -> Tensor[]", "aten::div", "Tensor"},
    {"_foreach_lerp.Scalar(Tensor[] self, Tensor[] tensors1, Scalar weight) -> Tensor[]",
     "aten::lerp", "Scalar"},
    {"_foreach_lerp.List(Tensor[] self, Tensor[] tensors1, Tensor[] weights) -> Tensor[]",
     "aten::lerp", "Tensor"},
};

std::string FullName(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : absl::StrCat(name.name, ".", name.overload_name);
}

// Each registered foreach operator's element operator; written once, before any kernel runs.
absl::flat_hash_map<std::string, c10::OperatorHandle>& ElementOps() {
  static auto* ops = new absl::flat_hash_map<std::string, c10::OperatorHandle>();
  return *ops;
}

// The decomposition: the element operator on element i of every list argument.
Stack Foreach(const Args& args) {
  const c10::FunctionSchema& schema = args.op().schema();
  const c10::OperatorHandle& element = ElementOps().at(FullName(args.op().operator_name()));
  const std::size_t n = args.at(0).toTensorList().size();
  for (std::size_t j = 1; j < args.size(); ++j) {
    if (args.at(j).isTensorList()) {
      TORCH_CHECK(args.at(j).toTensorList().size() == n, schema.name(), ": ",
                  schema.arguments()[j].name(), " has ", args.at(j).toTensorList().size(),
                  " tensors, self ", n);
    }
  }
  c10::List<at::Tensor> results;
  for (std::size_t i = 0; i < n; ++i) {
    Stack stack;
    for (std::size_t j = 0; j < args.size(); ++j) {
      const c10::IValue& v = args.at(j);
      if (schema.arguments()[j].name() == "scalars" && v.isTensor()) {  // one value per tensor
        stack.emplace_back(v.toTensor()[static_cast<int64_t>(i)].item());
      } else {
        stack.emplace_back(v.isTensorList() ? c10::IValue(v.toTensorList().get(i)) : v);
      }
    }
    element.callBoxed(&stack);
    if (!schema.returns().empty()) results.push_back(stack.at(0).toTensor());
  }
  if (schema.returns().empty()) return {};
  return {c10::IValue(std::move(results))};
}

// torch 2.x's fused attention entry point, as its math reference computes it: softmax(Q K^T *
// scale + mask) V, with GQA's key/value heads repeated. Declared with torch 2.5's schema (the
// newest, enable_gqa last): a call from torch 2.0-2.4, without enable_gqa, gets its default.
// Dropout draws: a call with dropout_p > 0 is a random call (the agent sees its generator move,
// ApiCall.drew_random), which a bench of another libtorch does not replay (random_call.cc).
constexpr const char* kSdpaSchema =
    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
    "float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> "
    "Tensor";

Stack ScaledDotProductAttention(const Args& args) {
  const at::Tensor& q = args.tensor(0);
  at::Tensor k = args.tensor(1);
  at::Tensor v = args.tensor(2);
  const std::optional<at::Tensor> mask = args.optional_tensor(3);
  const double dropout_p = args.f64(4);
  const bool is_causal = args.boolean(5);
  const double scale =
      args.at(6).isNone() ? 1.0 / std::sqrt(static_cast<double>(q.size(-1))) : args.f64(6);
  if (args.boolean(7) && q.dim() >= 3 && k.size(-3) != q.size(-3)) {  // enable_gqa
    const int64_t groups = q.size(-3) / k.size(-3);
    k = k.repeat_interleave(groups, -3);
    v = v.repeat_interleave(groups, -3);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (is_causal) {
    const at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  if (mask) {
    scores = mask->scalar_type() == at::kBool
                 ? scores.masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity())
                 : scores + *mask;
  }
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0) weights = at::dropout(weights, dropout_p, /*train=*/true);
  return oplib::Results({at::matmul(weights, v)});
}

std::vector<std::string> Register() {
  std::vector<std::string> added;
  auto* defs =
      new torch::Library(torch::Library::FRAGMENT, "aten", c10::nullopt, __FILE__, __LINE__);
  auto* impls = new torch::Library(torch::Library::IMPL, "aten",
                                   c10::DispatchKey::CompositeExplicitAutograd, __FILE__, __LINE__);
  for (const ForeachOp& e : kForeachOps) {
    const c10::FunctionSchema schema = torch::jit::parseSchema(absl::StrCat("aten::", e.schema));
    if (c10::Dispatcher::singleton().findSchema(schema.operator_name())) continue;  // has it
    c10::optional<c10::OperatorHandle> element =
        c10::Dispatcher::singleton().findSchema({e.element_op, e.element_overload});
    if (!element) continue;  // nothing to decompose into
    const std::string name = FullName(schema.operator_name());
    ElementOps().emplace(name, *element);
    defs->def(e.schema);
    impls->impl(name.substr(6).c_str(), oplib::Boxed<&Foreach>());  // "_foreach_mul_.Tensor"
    added.push_back(name);
  }
  if (!c10::Dispatcher::singleton().findSchema({"aten::scaled_dot_product_attention", ""})) {
    defs->def(kSdpaSchema);
    impls->impl("scaled_dot_product_attention", oplib::Boxed<&ScaledDotProductAttention>());
    added.push_back("aten::scaled_dot_product_attention");
  }
  RegisterMissingSdpaOps(&added);
  return added;  // the libraries stay registered for the life of the process
}

}  // namespace

const std::vector<std::string>& RegisterMissingAtenOps() {
  static const std::vector<std::string>* added = new std::vector<std::string>(Register());
  return *added;
}

}  // namespace parity::server
