// Every metric of the precision standard for one (tested, reference) output pair, in one pass.
// Torch-free: works on contiguous host buffers. See ../shared/precision-standard.md.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "common/wire/fields.h"
#include "server/compare/accumulator.h"
#include "server/compare/float_types.h"

namespace parity::server {

// A contiguous buffer of one output: in host memory, or in a CUDA device's memory (then the
// metrics are computed on that device: device_compare.h).
struct TensorView {
  wire::DType dtype = wire::kDTypeUnspecified;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  int64_t numel = 0;
  int cuda_device = -1;  // -1: host memory; else the index of the CUDA device holding `data`

  bool on_cuda() const { return cuda_device >= 0; }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// All metrics of one pair. Ratios are shares in [0, 1]. `cosine` is NaN when blank.
struct PairMetrics {
  int64_t numel = 0;
  double cosine = kNaN;
  bool cosine_blank = false;          // N = 1 or both sides ~0: not computed, passes
  bool cosine_one_side_zero = false;  // only one side ~0: not computed, an error
  double max_abs_error = 0;
  double max_abs_reference = 0;     // the reference's largest magnitude (not a CSV column)
  double hundredth_ratio = 1;       // share with rel_err < 1e-2
  double thousandth_ratio = 1;      // share with rel_err < 1e-3
  double ten_thousandth_ratio = 1;  // share with rel_err < 1e-4
  double mismatch_rate = 0;         // share not equal as values (NaN==NaN, -0==0 equal)
  double error_balance = 0;
  double rmse = 0;
  double small_value_error_ratio = 0;  // benchmark atol
  double max_rel_error = 0;            // over normal elements
  double mean_rel_error = 0;
  double inf_nan_error_rate = 0;
  double rel_error_rate = 0;  // normal elements with rel_err > rtol
  double abs_error_rate = 0;  // small elements with abs_err > absolute atol
  double ulp_max = 0;
  double ulp_mean = 0;
  double ulp_over_threshold_ratio = 0;
  bool has_float_metrics = true;  // false for integer/bool pairs (mismatch only)
};

// Calls f(T{}) with the fp:: element type of a floating dtype (float16, bfloat16, float32,
// float64); false, without calling it, for any other dtype.
template <typename F>
bool VisitFloat(wire::DType dtype, F&& f) {
  switch (dtype) {
    case wire::kFloat16:
      f(fp::Half{});
      return true;
    case wire::kBFloat16:
      f(fp::BFloat16{});
      return true;
    case wire::kFloat32:
      f(fp::Float{});
      return true;
    case wire::kFloat64:
      f(fp::Double{});
      return true;
    default:
      return false;
  }
}

// Computes every metric of `tested` against `reference`. Shapes and element counts must agree
// (checked: INVALID_ARGUMENT naming both). `tested` is float16/bfloat16/float32/float64 or an
// integer/bool type (then only the mismatch rate is computed); `reference` is a float type at
// least as wide, or the same integer type. `constants` are those of the tested dtype.
// Thread-safe; memory-bandwidth bound, one pass (plus a rescaling pass only if the raw cosine
// accumulators overflow).
absl::StatusOr<PairMetrics> ComputeMetrics(const TensorView& tested, const TensorView& reference,
                                           const DTypeConstants& constants);

}  // namespace parity::server
