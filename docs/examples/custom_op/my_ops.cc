// A reference library for custom operators (docs/operators.md#your-own-operators).
//
// The training process has its own kernels for myops::scaled_tanh and myops::fused_dropout_add
// (fused device kernels, say); this library gives the benchmark server the same schemas with
// kernels composed of aten ops. Registered for CompositeExplicitAutograd, each kernel replays on
// the CPU, on a CUDA bench, and in float64 for the golden.
#include <torch/library.h>

namespace {

// alpha * tanh(x / alpha), computed in float32 for float16/bfloat16 inputs, as a device would.
at::Tensor ScaledTanh(const at::Tensor& x, double alpha) {
  const bool low = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  const at::Tensor xc = low ? x.to(at::kFloat) : x;
  return (at::tanh(xc / alpha) * alpha).to(x.scalar_type());
}

// dropout(x, p) + residual, drawing its mask from the default generator of x's device as
// aten::dropout does: a random operator, which the server can replay bit for bit only from the
// training's generator state, so both sides list it in their operator catalogue
// (docs/operators.md#the-operator-catalogue).
at::Tensor FusedDropoutAdd(const at::Tensor& x, const at::Tensor& residual, double p, bool train) {
  return at::dropout(x, p, train) + residual;
}

}  // namespace

// The schemas, exactly as the training process declares them.
TORCH_LIBRARY(myops, m) {
  m.def("scaled_tanh(Tensor x, float alpha=1.0) -> Tensor");
  m.def("fused_dropout_add(Tensor x, Tensor residual, float p, bool train) -> Tensor");
}

TORCH_LIBRARY_IMPL(myops, CompositeExplicitAutograd, m) {
  m.impl("scaled_tanh", TORCH_FN(ScaledTanh));
  m.impl("fused_dropout_add", TORCH_FN(FusedDropoutAdd));
}
