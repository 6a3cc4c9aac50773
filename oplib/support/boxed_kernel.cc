#include "oplib/support/boxed_kernel.h"

namespace parity::oplib {

const c10::IValue& Args::at(std::size_t i) const {
  TORCH_CHECK(i < values_.size(), op_name(), ": no argument ", i);
  return values_[i];
}

std::string Args::op_name() const { return op_->schema().name(); }

const at::Tensor& Args::tensor(std::size_t i) const {
  const c10::IValue& v = at(i);
  TORCH_CHECK(v.isTensor() && v.toTensor().defined(), op_name(), ": argument ",
              op_->schema().arguments()[i].name(), " must be a tensor");
  return v.toTensor();
}

std::optional<at::Tensor> Args::optional_tensor(std::size_t i) const {
  const c10::IValue& v = at(i);
  if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) return std::nullopt;
  return tensor(i);
}

double Args::f64(std::size_t i) const {
  const c10::IValue& v = at(i);
  return v.isInt() ? static_cast<double>(v.toInt()) : v.toDouble();
}

int64_t Args::i64(std::size_t i) const { return at(i).toInt(); }

std::optional<int64_t> Args::optional_i64(std::size_t i) const {
  const c10::IValue& v = at(i);
  if (v.isNone()) return std::nullopt;
  return v.toInt();
}

std::vector<at::Tensor> Args::tensors(std::size_t i) const {
  const c10::IValue& v = at(i);
  if (v.isNone()) return {};
  TORCH_CHECK(v.isTensorList(), op_name(), ": argument ", op_->schema().arguments()[i].name(),
              " must be a list of tensors");
  return v.toTensorVector();
}
bool Args::boolean(std::size_t i) const { return at(i).toBool(); }

std::optional<bool> Args::optional_bool(std::size_t i) const {
  const c10::IValue& v = at(i);
  if (v.isNone()) return std::nullopt;
  return v.toBool();
}

std::string Args::str(std::size_t i) const { return at(i).toStringRef(); }
at::Scalar Args::scalar(std::size_t i) const { return at(i).toScalar(); }

std::vector<int64_t> Args::ints(std::size_t i) const {
  const c10::IValue& v = at(i);
  if (v.isInt()) return {v.toInt()};  // `int[2] x=1` broadcasts one value
  return v.toIntVector();
}

std::optional<std::vector<int64_t>> Args::optional_ints(std::size_t i) const {
  if (at(i).isNone()) return std::nullopt;
  return ints(i);
}

std::vector<bool> Args::bools(std::size_t i) const {
  const c10::IValue& v = at(i);
  std::vector<bool> out;
  if (v.isBool()) return {v.toBool()};
  for (bool b : v.toBoolList()) out.push_back(b);
  return out;
}

}  // namespace parity::oplib
