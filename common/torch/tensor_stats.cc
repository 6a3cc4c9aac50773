#include "common/torch/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/torch/torch_pch.h"

namespace parity::common {

TensorStatsValues TensorStatistics(const at::Tensor& tensor) {
  TensorStatsValues stats;
  at::Tensor flat = tensor.detach().reshape({-1});
  if (flat.is_complex()) flat = at::view_as_real(flat).reshape({-1});
  const int64_t n = flat.numel();
  constexpr int64_t kSlice = int64_t{1} << 22;
  double min = std::numeric_limits<double>::infinity();
  double max = -min;
  double sum = 0, sum_sq = 0;
  int64_t finite = 0, nans = 0, infs = 0;
  for (int64_t begin = 0; begin < n; begin += kSlice) {
    at::Tensor s = flat.slice(0, begin, std::min(n, begin + kSlice)).to(at::kDouble);
    at::Tensor is_finite = at::isfinite(s);
    nans += at::isnan(s).sum().item<int64_t>();
    infs += at::isinf(s).sum().item<int64_t>();
    at::Tensor f = s.masked_select(is_finite);
    if (f.numel() == 0) continue;
    finite += f.numel();
    min = std::min(min, f.min().item<double>());
    max = std::max(max, f.max().item<double>());
    sum += f.sum().item<double>();
    sum_sq += (f * f).sum().item<double>();
  }
  stats.nan_count = static_cast<uint64_t>(nans);
  stats.inf_count = static_cast<uint64_t>(infs);
  if (finite > 0) {
    stats.any_finite = true;
    stats.min = min;
    stats.max = max;
    stats.mean = sum / static_cast<double>(finite);
    stats.l2_norm = std::sqrt(sum_sq);
  }
  return stats;
}

}  // namespace parity::common
