// A reference library for a custom operator (docs/operators.md#your-own-operators).
//
// The training process has its own kernel for myops::scaled_tanh (a fused device kernel, say);
// this library gives the benchmark server the same schema with a kernel composed of aten ops.
// Registered for CompositeExplicitAutograd, the one kernel replays on the CPU, on a CUDA bench,
// and in float64 for the golden.
#include <torch/library.h>

namespace {

// alpha * tanh(x / alpha), computed in float32 for float16/bfloat16 inputs, as a device would.
at::Tensor ScaledTanh(const at::Tensor& x, double alpha) {
  const bool low = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  const at::Tensor xc = low ? x.to(at::kFloat) : x;
  return (at::tanh(xc / alpha) * alpha).to(x.scalar_type());
}

}  // namespace

// The schema, exactly as the training process declares it.
TORCH_LIBRARY(myops, m) { m.def("scaled_tanh(Tensor x, float alpha=1.0) -> Tensor"); }

TORCH_LIBRARY_IMPL(myops, CompositeExplicitAutograd, m) {
  m.impl("scaled_tanh", TORCH_FN(ScaledTanh));
}
