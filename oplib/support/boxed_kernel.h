// Boxed kernels for operator libraries whose schemas are data: one kernel form for every schema
// (no C++ signature to keep in step with a schema string), on every libtorch version.
//
// A kernel is `Stack Kernel(const Args&)`: it reads its arguments by position, in the schema's
// order, and returns its results in the schema's order. Register it with
//   m.impl("npu_rms_norm", parity::oplib::Boxed<&RmsNorm>());
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "common/torch/torch_pch.h"

namespace parity::oplib {

using Stack = std::vector<c10::IValue>;

// The arguments of one call, by position.
class Args {
 public:
  Args(const c10::OperatorHandle& op, Stack values) : op_(&op), values_(std::move(values)) {}

  std::size_t size() const { return values_.size(); }
  const c10::IValue& at(std::size_t i) const;

  const at::Tensor& tensor(std::size_t i) const;
  // `Tensor?`: nullopt for None and for an undefined tensor.
  std::optional<at::Tensor> optional_tensor(std::size_t i) const;
  double f64(std::size_t i) const;
  int64_t i64(std::size_t i) const;
  bool boolean(std::size_t i) const;
  std::optional<bool> optional_bool(std::size_t i) const;
  std::string str(std::size_t i) const;
  at::Scalar scalar(std::size_t i) const;
  std::vector<int64_t> ints(std::size_t i) const;
  std::optional<std::vector<int64_t>> optional_ints(std::size_t i) const;
  std::vector<bool> bools(std::size_t i) const;
  // `Tensor[]`, and `Tensor[]?` (empty for None).
  std::vector<at::Tensor> tensors(std::size_t i) const;
  // `int?`: nullopt for None.
  std::optional<int64_t> optional_i64(std::size_t i) const;

  // "npu::npu_rms_norm", for error messages.
  std::string op_name() const;
  // The operator called (its schema: a kernel shared by several operators tells them apart).
  const c10::OperatorHandle& op() const { return *op_; }

 private:
  const c10::OperatorHandle* op_;
  Stack values_;
};

using Kernel = Stack (*)(const Args&);

// The boxed function for `kernel`: takes the schema's arguments off the stack, pushes the
// results.
template <Kernel kernel>
void CallBoxed(const c10::OperatorHandle& op, Stack* stack) {
  const std::size_t n = op.schema().arguments().size();
  TORCH_CHECK(stack->size() >= n, op.schema().name(), ": ", stack->size(), " values for ", n,
              " arguments");
  Args args(op, Stack(std::make_move_iterator(stack->end() - static_cast<std::ptrdiff_t>(n)),
                      std::make_move_iterator(stack->end())));
  stack->erase(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  Stack results = kernel(args);
  TORCH_CHECK(results.size() == op.schema().returns().size(), op.schema().name(), ": kernel made ",
              results.size(), " results for ", op.schema().returns().size(), " returns");
  for (c10::IValue& r : results) stack->push_back(std::move(r));
}

template <Kernel kernel>
torch::CppFunction Boxed() {
  return torch::CppFunction::makeFromBoxedFunction<&CallBoxed<kernel>>();
}

// Tensors as results.
inline Stack Results(std::initializer_list<at::Tensor> tensors) {
  Stack out;
  for (const at::Tensor& t : tensors) out.emplace_back(t);
  return out;
}

}  // namespace parity::oplib
