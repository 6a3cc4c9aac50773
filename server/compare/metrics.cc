#include "server/compare/metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/log.h"
#include "common/base/parallel.h"
#include "common/wire/dtype.h"
#include "server/compare/accumulate.h"
#include "server/compare/device_compare.h"
#include "server/compare/element.h"
#include "server/compare/float_types.h"

namespace parity::server {
namespace {

constexpr double kCosineZero = 2.220446e-16;

using internal::Accumulator;

template <typename T, typename R>
void Accumulate(const void* tp, const void* rp, int64_t begin, int64_t end, const DTypeConstants& c,
                double eps, Accumulator& a) {
  for (int64_t i = begin; i < end; ++i) {
    internal::AccumulateElement<T, R>(T::Load(tp, i), R::Load(rp, i), c, eps, a);
  }
}

// Cosine with each side divided by its max-abs first (msprobe's normalisation), used only when
// the raw sums overflowed (values near the float64 range).
template <typename T, typename R>
double ScaledCosine(const void* tp, const void* rp, int64_t n, double mt, double mr) {
  double dot = 0, nt = 0, nr = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double t = T::Load(tp, i) / mt;
    const double r = R::Load(rp, i) / mr;
    dot += t * r;
    nt += t * t;
    nr += r * r;
  }
  return dot / (std::sqrt(nt) * std::sqrt(nr));
}

// Elements per chunk: each chunk has its own accumulator and the chunks are merged in order, so
// the result does not depend on how many threads ran them.
constexpr int64_t kChunk = int64_t{1} << 15;
// Below this many elements one thread does it all (a thread costs more than it saves).
constexpr int64_t kParallelFrom = int64_t{1} << 18;

std::atomic<int>& CompareThreadsSetting() {
  static std::atomic<int> threads{
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  return threads;
}

Accumulator AccumulateAll(wire::DType td, wire::DType rd, const void* tp, const void* rp, int64_t n,
                          const DTypeConstants& c, double eps) {
  const internal::Kernel kernel = internal::ActiveKernel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int threads = n < kParallelFrom
                          ? 1
                          : static_cast<int>(std::min<int64_t>(chunks, internal::CompareThreads()));
  Accumulator total;
  if (threads <= 1) {
    for (int64_t k = 0; k < chunks; ++k) {
      Accumulator part;
      kernel(td, rd, tp, rp, k * kChunk, std::min(n, (k + 1) * kChunk), c, eps, part);
      internal::Merge(total, part);
    }
    return total;
  }
  std::vector<Accumulator> parts(static_cast<size_t>(chunks));
  common::ParallelFor(chunks, threads, [&](int64_t k) {
    kernel(td, rd, tp, rp, k * kChunk, std::min(n, (k + 1) * kChunk), c, eps,
           parts[static_cast<size_t>(k)]);
  });
  for (const Accumulator& part : parts) internal::Merge(total, part);
  return total;
}

// The metrics of n elements from their sums. `scaled_cosine(max_abs_tested, max_abs_ref)`
// recomputes the cosine when the raw sums overflowed.
template <typename ScaledCosineFn>
PairMetrics Finish(const Accumulator& a, int64_t n, ScaledCosineFn&& scaled_cosine) {
  PairMetrics m;
  m.numel = n;
  if (n == 0) {
    m.cosine_blank = true;
    return m;
  }
  const double dn = static_cast<double>(n);
  // Cosine: blank for a single element or when both sides are ~0; an error when only one is.
  const bool zero_t = a.max_abs_tested <= kCosineZero, zero_r = a.max_abs_ref <= kCosineZero;
  if (n == 1 || (zero_t && zero_r)) {
    m.cosine_blank = true;
  } else if (zero_t != zero_r) {
    m.cosine_one_side_zero = true;
  } else {
    double cos = a.dot / (std::sqrt(a.norm_t) * std::sqrt(a.norm_r));
    // Not finite with finite maxima: the sums overflowed (values near the float64 range) or a
    // value is NaN (then the cosine is NaN however it is computed: no second pass).
    if (!std::isfinite(cos) && !a.nan_error && std::isfinite(a.max_abs_tested) &&
        std::isfinite(a.max_abs_ref)) {
      cos = scaled_cosine(a.max_abs_tested, a.max_abs_ref);
    }
    m.cosine = std::isnan(cos) ? cos : std::clamp(cos, -1.0, 1.0);
  }
  m.max_abs_error = a.nan_error ? kNaN : a.max_abs_error;
  m.max_abs_reference = a.max_abs_ref;
  m.hundredth_ratio = a.hundredth / dn;
  m.thousandth_ratio = a.thousandth / dn;
  m.ten_thousandth_ratio = a.ten_thousandth / dn;
  m.mismatch_rate = a.mismatches / dn;
  m.error_balance = std::fabs(static_cast<double>(a.above - a.below)) / dn;
  // msprobe's rescaled RMSE: mean over all N of the masked squares, corrected for the mask.
  const double mse =
      (a.sum_sq_masked / dn) * (dn / (static_cast<double>(n - a.n_masked) + 1e-4) + 1e-4);
  m.rmse = std::sqrt(mse);
  m.small_value_error_ratio =
      a.n_small == 0 ? 0.0 : static_cast<double>(a.small_bench_fail) / a.n_small;
  m.abs_error_rate = a.n_small == 0 ? 0.0 : static_cast<double>(a.small_abs_fail) / a.n_small;
  m.rel_error_rate = a.n_normal == 0 ? 0.0 : static_cast<double>(a.rel_fail) / a.n_normal;
  m.max_rel_error = a.n_normal == 0 ? 0.0 : a.max_rel;
  m.mean_rel_error = a.n_normal == 0 ? 0.0 : a.sum_rel / a.n_normal;
  m.inf_nan_error_rate = a.n_inf_nan == 0 ? 0.0 : static_cast<double>(a.inf_nan_fail) / a.n_inf_nan;
  m.ulp_max = a.ulp_nan ? kNaN : a.ulp_max;
  m.ulp_mean = a.ulp_nan ? kNaN : a.ulp_sum / dn;
  m.ulp_over_threshold_ratio = a.ulp_over / dn;
  return m;
}

template <typename T, typename R>
PairMetrics Compute(const TensorView& tested, const TensorView& ref, const DTypeConstants& c,
                    double eps) {
  const int64_t n = tested.numel;
  const Accumulator a = AccumulateAll(tested.dtype, ref.dtype, tested.data, ref.data, n, c, eps);
  return Finish(a, n, [&](double mt, double mr) {
    return ScaledCosine<T, R>(tested.data, ref.data, n, mt, mr);
  });
}

// The same metrics with the pass on the CUDA device holding both sides (device_compare.h).
absl::StatusOr<PairMetrics> ComputeOnDevice(const TensorView& tested, const TensorView& ref,
                                            const DTypeConstants& c, double eps) {
  if (tested.cuda_device != ref.cuda_device || !common::IsFloating(tested.dtype) ||
      !common::IsFloating(ref.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA compare takes two floating outputs on one device, not ",
                     common::TorchName(tested.dtype), " on ", tested.cuda_device, " and ",
                     common::TorchName(ref.dtype), " on ", ref.cuda_device, " (-1: the host)"));
  }
  const int64_t n = tested.numel;
  if (n == 0) return Finish(Accumulator{}, 0, [](double, double) { return kNaN; });
  const internal::DeviceSpan t{internal::KindOf(tested.dtype), tested.data},
      r{internal::KindOf(ref.dtype), ref.data};
  Accumulator a;
  std::string error = internal::DeviceAccumulate(tested.cuda_device, t, r, n, c, eps, &a);
  if (!error.empty()) return absl::InternalError(error);
  PairMetrics m = Finish(a, n, [&](double mt, double mr) {
    double cosine = kNaN;
    error = internal::DeviceScaledCosine(tested.cuda_device, t, r, n, mt, mr, &cosine);
    return cosine;
  });
  if (!error.empty()) return absl::InternalError(error);
  return m;
}

// Elements whose N bytes differ (a fixed-size memcmp the compiler inlines).
template <std::size_t N>
int64_t CountMismatches(const char* t, const char* r, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += std::memcmp(t + i * N, r + i * N, N) != 0;
  return count;
}

std::string Shape(const std::vector<int64_t>& s) {
  return absl::StrCat("(", absl::StrJoin(s, ", "), ")");
}

// Reference epsilon: machine epsilon of the reference's dtype, 2^-8 for bfloat16 devices.
double Epsilon(wire::DType tested, wire::DType ref) {
  if (tested == wire::kBFloat16) return 0.00390625;
  switch (ref) {
    case wire::kFloat16:
      return fp::Half::kEps;
    case wire::kBFloat16:
      return fp::BFloat16::kEps;
    case wire::kFloat32:
      return fp::Float::kEps;
    default:
      return fp::Double::kEps;
  }
}

}  // namespace

absl::StatusOr<PairMetrics> ComputeMetrics(const TensorView& tested, const TensorView& reference,
                                           const DTypeConstants& constants) {
  if (tested.shape != reference.shape || tested.numel != reference.numel) {
    return absl::InvalidArgumentError(absl::StrCat("The shape of bench", Shape(reference.shape),
                                                   " and npu", Shape(tested.shape), " not equal."));
  }
  if (tested.on_cuda() || reference.on_cuda()) {
    return ComputeOnDevice(tested, reference, constants, Epsilon(tested.dtype, reference.dtype));
  }
  std::optional<absl::StatusOr<PairMetrics>> floating;
  const double eps = Epsilon(tested.dtype, reference.dtype);
  if (VisitFloat(tested.dtype, [&](auto t) {
        VisitFloat(reference.dtype, [&](auto r) {
          floating = Compute<decltype(t), decltype(r)>(tested, reference, constants, eps);
        });
      })) {
    if (floating) return *std::move(floating);
    return absl::InvalidArgumentError(absl::StrCat(
        "reference dtype ", common::TorchName(reference.dtype), " cannot judge a floating output"));
  }
  // Integer, bool (and complex, compared bitwise per component) outputs: exact comparison only.
  if (tested.dtype != reference.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("cannot compare ",
                                                   common::TorchName(tested.dtype), " with ",
                                                   common::TorchName(reference.dtype)));
  }
  PairMetrics m;
  m.numel = tested.numel;
  m.has_float_metrics = false;
  // Element-wise bit comparison (complex elements compared whole, like every other dtype).
  const auto* t = static_cast<const char*>(tested.data);
  const auto* r = static_cast<const char*>(reference.data);
  int64_t mismatches = 0;
  switch (common::ElementSize(tested.dtype)) {
    case 1:
      mismatches = CountMismatches<1>(t, r, tested.numel);
      break;
    case 2:
      mismatches = CountMismatches<2>(t, r, tested.numel);
      break;
    case 4:
      mismatches = CountMismatches<4>(t, r, tested.numel);
      break;
    case 8:
      mismatches = CountMismatches<8>(t, r, tested.numel);
      break;
    case 16:
      mismatches = CountMismatches<16>(t, r, tested.numel);
      break;
    default:
      return absl::InvalidArgumentError("unknown dtype");
  }
  m.mismatch_rate =
      tested.numel == 0 ? 0.0 : static_cast<double>(mismatches) / static_cast<double>(tested.numel);
  return m;
}

namespace internal {

void ScalarKernel(wire::DType td, wire::DType rd, const void* t, const void* r, int64_t begin,
                  int64_t end, const DTypeConstants& c, double eps, Accumulator& a) {
  VisitFloatType(td, [&](auto tested) {
    VisitFloatType(rd, [&](auto reference) {
      Accumulate<decltype(tested), decltype(reference)>(t, r, begin, end, c, eps, a);
    });
  });
}

Kernel ChooseKernel(const std::string& wanted, const std::vector<NamedKernel>& simd,
                    std::string* warning) {
  if (wanted == "scalar") return &ScalarKernel;
  for (const NamedKernel& k : simd) {
    if (wanted == k.name) return k.kernel;
  }
  if (!wanted.empty()) {
    std::vector<std::string> names = {"scalar"};
    for (const NamedKernel& k : simd) names.emplace_back(k.name);
    *warning = absl::StrCat("PARITY_COMPARE_KERNEL=", wanted, " is not a kernel this CPU can run (",
                            absl::StrJoin(names, ", "), "); using ",
                            simd.empty() ? "scalar" : simd.front().name);
  }
  return simd.empty() ? &ScalarKernel : simd.front().kernel;
}

Kernel ActiveKernel() {
  static const Kernel kernel = [] {
    const char* env = std::getenv("PARITY_COMPARE_KERNEL");
    std::string warning;
    const Kernel k = ChooseKernel(env != nullptr ? env : "", SimdKernels(), &warning);
    if (!warning.empty()) common::LogWarning(warning);
    return k;
  }();
  return kernel;
}

void SetCompareThreads(int threads) { CompareThreadsSetting().store(std::max(1, threads)); }
int CompareThreads() { return CompareThreadsSetting().load(); }

}  // namespace internal
}  // namespace parity::server
