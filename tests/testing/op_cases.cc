#include "tests/testing/op_cases.h"

#include "parity/v1/parity.pb.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "common/torch/boxed_call.h"
#include "common/torch/value_codec.h"
#include "gtest/gtest.h"

namespace parity::testing {

v1::ApiCall BuildCall(const std::string& name, const std::string& overload, Stack args,
                      v1::Phase phase, const std::function<void(Stack&)>& tamper,
                      uint64_t sequence) {
  v1::ApiCall call;
  call.set_sequence(sequence);
  call.set_op_name(name);
  call.set_overload(overload);
  call.set_phase(phase);
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  const auto& schema = op.schema();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::Type* hint =
        i < schema.arguments().size() ? schema.arguments()[i].real_type().get() : nullptr;
    absl::Status s = common::EncodeValue(args[i], hint, {}, "in", call.add_inputs());
    EXPECT_TRUE(s.ok()) << s;
  }
  Stack stack = args;
  for (auto& v : stack) {  // the device runs on its own copies (in-place ops mutate them)
    if (v.isTensor() && v.toTensor().defined()) v = v.toTensor().clone();
    if (v.isTensorList()) {
      c10::List<at::Tensor> copies;
      for (const c10::IValue& t : v.toListRef()) copies.push_back(t.toTensor().clone());
      v = copies;
    }
  }
  // An op that returns nothing: the arguments it writes are its results, as the agent sends.
  common::CallBoxedForResults(op, stack);
  if (tamper) tamper(stack);
  for (const auto& out : stack) {
    absl::Status s = common::EncodeValue(out, nullptr, {}, "out", call.add_outputs());
    EXPECT_TRUE(s.ok()) << s;
  }
  return call;
}

at::Tensor R(std::vector<int64_t> shape, int seed, at::ScalarType dtype) {
  at::manual_seed(seed);
  return at::randn(shape).to(dtype);
}

std::vector<OpCase> CleanCases() {
  const at::Tensor x = R({4, 8}, 1), y = R({4, 8}, 2), w = R({6, 8}, 3), b = R({6}, 4);
  const at::Tensor img = R({2, 3, 8, 8}, 5), ker = R({4, 3, 3, 3}, 6);
  const at::Tensor idx = at::randint(0, 4, {4, 8}, at::kLong);
  const at::Tensor big = R({4, 16}, 7) * 5;
  return {
      {"aten::add", "Tensor",
       [=] {
         return Stack{x, y, 1};
       },
       v1::PHASE_FORWARD, "absolute_threshold"},
      {"aten::sub", "Tensor",
       [=] {
         return Stack{x, y, 2};
       },
       v1::PHASE_FORWARD, "absolute_threshold"},
      {"aten::mul", "Tensor",
       [=] {
         return Stack{x, y};
       },
       v1::PHASE_FORWARD, "absolute_threshold"},
      {"aten::div", "Tensor",
       [=] {
         return Stack{x, y.abs() + 0.5};
       },
       v1::PHASE_FORWARD, "absolute_threshold"},
      {"aten::rsqrt", "", [=] { return Stack{x.abs() + 0.1}; }, v1::PHASE_FORWARD,
       "absolute_threshold"},
      {"aten::reciprocal", "", [=] { return Stack{x.abs() + 0.1}; }, v1::PHASE_FORWARD,
       "absolute_threshold"},
      {"aten::relu", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "binary"},
      {"aten::abs", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "binary"},
      {"aten::neg", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "binary"},
      {"aten::floor", "", [=] { return Stack{x * 3}; }, v1::PHASE_FORWARD, "binary"},
      {"aten::gather", "",
       [=] {
         return Stack{x, 0, idx, false};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::maximum", "",
       [=] {
         return Stack{x, y};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::tril", "",
       [=] {
         return Stack{x, 0};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::masked_fill", "Scalar",
       [=] {
         return Stack{x, x > 0, 0.1};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::mm", "",
       [=] {
         return Stack{x, w.t()};
       },
       v1::PHASE_FORWARD, "ulp"},
      {"aten::addmm", "",
       [=] {
         return Stack{b, x, w.t(), 1, 1};
       },
       v1::PHASE_FORWARD, "ulp"},
      {"aten::bmm", "",
       [=] {
         return Stack{R({2, 3, 4}, 8), R({2, 4, 5}, 9)};
       },
       v1::PHASE_FORWARD, "ulp"},
      {"aten::matmul", "",
       [=] {
         return Stack{x, w.t()};
       },
       v1::PHASE_FORWARD, "ulp"},
      {"aten::linear", "",
       [=] {
         return Stack{x, w, b};
       },
       v1::PHASE_FORWARD, "ulp"},
      {"aten::conv2d", "",
       [=] {
         return Stack{img,
                      ker,
                      c10::IValue(),
                      c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({1, 1}),
                      1};
       },
       v1::PHASE_FORWARD, "thousandth"},
      {"aten::gelu", "",
       [=] {
         return Stack{x, std::string("none")};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::_softmax", "",
       [=] {
         return Stack{big, 1, false};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::_log_softmax", "",
       [=] {
         return Stack{big, 1, false};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::native_layer_norm", "",
       [=] {
         return Stack{x, c10::List<int64_t>({8}), R({8}, 10), R({8}, 11), 1e-5};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::exp", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "benchmark"},
      {"aten::tanh", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "benchmark"},
      {"aten::sigmoid", "", [=] { return Stack{x}; }, v1::PHASE_FORWARD, "benchmark"},
      {"aten::sum", "dim_IntList",
       [=] {
         return Stack{big, c10::List<int64_t>({1}), false, c10::IValue()};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::mean", "dim",
       [=] {
         return Stack{big, c10::List<int64_t>({0}), true, c10::IValue()};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::cumsum", "",
       [=] {
         return Stack{x, 1, c10::IValue()};
       },
       v1::PHASE_FORWARD, "benchmark"},
      // Exact by construction (standards.json): the binary standard against the bench.
      {"aten::index_select", "",
       [=] {
         return Stack{x, 0, at::tensor({2, 0}, at::kLong)};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::cat", "",
       [=] {
         return Stack{c10::List<at::Tensor>({x, y}), 0};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::embedding", "",
       [=] {
         return Stack{w, at::tensor({0, 5, 2}, at::kLong), -1, false, false};
       },
       v1::PHASE_FORWARD, "binary"},
      {"aten::pow", "Tensor_Scalar",
       [=] {
         return Stack{x, 2};
       },
       v1::PHASE_FORWARD, "benchmark"},
      {"aten::mul", "Tensor",
       [=] {
         return Stack{x.to(at::kBFloat16), y.to(at::kBFloat16)};
       },
       v1::PHASE_FORWARD, "absolute_threshold"},
      {"aten::gelu", "",
       [=] {
         return Stack{x.to(at::kBFloat16), std::string("tanh")};
       },
       v1::PHASE_FORWARD, "benchmark"},
      // Backward ops, as the autograd engine runs them.
      {"aten::gelu_backward", "",
       [=] {
         return Stack{y, x, std::string("none")};
       },
       v1::PHASE_BACKWARD, "benchmark"},
      {"aten::threshold_backward", "",
       [=] {
         return Stack{y, x, 0};
       },
       v1::PHASE_BACKWARD, "benchmark"},
      {"aten::_softmax_backward_data", "",
       [=] {
         return Stack{y, at::_softmax(x, 1, false), 1, at::kFloat};
       },
       v1::PHASE_BACKWARD, "benchmark"},
      {"aten::tanh_backward", "",
       [=] {
         return Stack{y, at::tanh(x)};
       },
       v1::PHASE_BACKWARD, "benchmark"},
      {"aten::mm", "",
       [=] {
         return Stack{y.t(), x};
       },
       v1::PHASE_BACKWARD, "ulp"},
      {"aten::convolution_backward", "",
       [=] {
         return Stack{R({2, 4, 8, 8}, 12),
                      img,
                      ker,
                      c10::List<int64_t>({4}),
                      c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({1, 1}),
                      false,
                      c10::List<int64_t>({0, 0}),
                      1,
                      c10::List<bool>({true, true, false})};
       },
       v1::PHASE_BACKWARD, "benchmark"},
  };
}

}  // namespace parity::testing
