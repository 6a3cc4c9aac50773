// The simulated accelerator's GEMMs, for the trainings of the test suites (test only; loaded by
// tests/device/sitecustomize.py into every training that tests/e2e/harness.py runs).
//
// An accelerator multiplies float16 and bfloat16 matrices by accumulating in float32 and
// rounding once (an Ascend NPU's cube unit; cuBLAS as parity-server sets it). libtorch 1.13's CPU
// kernels on a CPU without AVX-512 round every partial sum of a bfloat16 mm or bmm to bfloat16
// unless the second operand is transposed: the fault tests/faults plants as
// mm_bfloat16_accumulator. parity-server's CPU bench accumulates in float32 and reports it, so a
// "clean" training on such a host would not be clean. These kernels replace the CPU kernels of
// the four functional GEMMs the trainings' forward and backward passes call: float16/bfloat16
// operands are raised to float32, multiplied by libtorch's own float32 kernel (called directly,
// not through the dispatcher), and the result is rounded once. Other dtypes go to libtorch's
// kernel unchanged. A planted fault registered later for the same op replaces these.
#include <ATen/ATen.h>
#include <ATen/CPUFunctions.h>
#include <torch/library.h>

#include <initializer_list>

namespace {

// The one low-precision dtype all `tensors` share, else Undefined.
at::ScalarType SharedLowDtype(std::initializer_list<const at::Tensor*> tensors) {
  const at::ScalarType first = (*tensors.begin())->scalar_type();
  if (first != at::kBFloat16 && first != at::kHalf) return at::ScalarType::Undefined;
  for (const at::Tensor* t : tensors) {
    if (t->scalar_type() != first) return at::ScalarType::Undefined;
  }
  return first;
}

at::Tensor Raised(const at::Tensor& t) { return t.to(at::kFloat); }

at::Tensor Mm(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType low = SharedLowDtype({&a, &b});
  if (low == at::ScalarType::Undefined) return at::cpu::mm(a, b);
  return at::cpu::mm(Raised(a), Raised(b)).to(low);
}

at::Tensor Bmm(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType low = SharedLowDtype({&a, &b});
  if (low == at::ScalarType::Undefined) return at::cpu::bmm(a, b);
  return at::cpu::bmm(Raised(a), Raised(b)).to(low);
}

at::Tensor Addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  const at::ScalarType low = SharedLowDtype({&a, &b, &self});
  if (low == at::ScalarType::Undefined) return at::cpu::addmm(self, a, b, beta, alpha);
  return at::cpu::addmm(Raised(self), Raised(a), Raised(b), beta, alpha).to(low);
}

at::Tensor Baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  const at::ScalarType low = SharedLowDtype({&a, &b, &self});
  if (low == at::ScalarType::Undefined) return at::cpu::baddbmm(self, a, b, beta, alpha);
  return at::cpu::baddbmm(Raised(self), Raised(a), Raised(b), beta, alpha).to(low);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("mm", Mm);
  m.impl("bmm", Bmm);
  m.impl("addmm", Addmm);
  m.impl("baddbmm", Baddbmm);
}
