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
#include "common/wire/dtype.h"
#include "server/compare/accumulate.h"
#include "server/compare/float_types.h"
#include "server/compare/parallel.h"

namespace parity::server {
namespace {

constexpr double kCosineZero = 2.220446e-16;

using internal::Accumulator;

// ULP error of one element: |t - r| * 2^(mantissa_bits - e), e = max(floor(log2|r|), min_e),
// e = 0 where r = 0. `UlpInDouble` computes the difference in float64 (float32 devices), else in
// float32, as msprobe does.
template <bool UlpInDouble>
inline double Ulp(double t, double r, const DTypeConstants& c) {
  double diff;
  if constexpr (UlpInDouble) {
    diff = std::fabs(t - r);
  } else {
    diff = std::fabs(
        static_cast<double>(static_cast<float>(static_cast<float>(t) - static_cast<float>(r))));
  }
  if (!std::isfinite(r) || !std::isfinite(t)) {
    return t == r ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  }
  int e = std::max(0, c.ulp_min_exponent);
  if (r != 0) {
    // floor(log2|r|) from the exponent bits; libm only for subnormals.
    uint64_t bits;
    std::memcpy(&bits, &r, 8);
    const int biased = static_cast<int>((bits >> 52) & 0x7FF);
    e = std::max(biased != 0 ? biased - 1023 : std::ilogb(r), c.ulp_min_exponent);
  }
  const int k = c.ulp_mantissa_bits - e;
  if (k < -1022 || k > 1023) return std::ldexp(diff, k);
  const uint64_t scale_bits = static_cast<uint64_t>(k + 1023) << 52;  // exactly 2^k
  double scale;
  std::memcpy(&scale, &scale_bits, 8);
  return diff * scale;
}

template <typename T, typename R>
void Accumulate(const void* tp, const void* rp, int64_t begin, int64_t end, const DTypeConstants& c,
                double eps, Accumulator& a) {
  constexpr bool kUlpInDouble = std::is_same_v<T, fp::Float> || std::is_same_v<T, fp::Double>;
  for (int64_t i = begin; i < end; ++i) {
    const double t = T::Load(tp, i);
    const double r = R::Load(rp, i);
    const double r_t = T::Round(r);  // reference cast to the tested dtype
    const double abs_t = std::fabs(t), abs_r = std::fabs(r);
    a.max_abs_tested = std::max(a.max_abs_tested, abs_t);
    a.max_abs_ref = std::max(a.max_abs_ref, abs_r);
    a.dot += t * r;
    a.norm_t += t * t;
    a.norm_r += r * r;

    double err, rel;
    if constexpr (internal::kErrorsInFloat<T, R>) {
      // float32 arithmetic, as msprobe's numpy does for these dtypes (t and r are float32 values).
      const float err_f = std::fabs(static_cast<float>(t) - static_cast<float>(r));
      err = err_f;
      rel = err_f / (static_cast<float>(abs_r) + static_cast<float>(eps));
    } else {
      err = std::fabs(t - r);
      rel = err / (abs_r + eps);
    }
    if (std::isnan(err)) a.nan_error = true;
    a.max_abs_error = std::max(a.max_abs_error, err);
    a.hundredth += rel < 1e-2;  // NaN compares false: counts as failing
    a.thousandth += rel < 1e-3;
    a.ten_thousandth += rel < 1e-4;
    // Compared with the reference rounded to the tested dtype: an exact op (relu, gather,
    // masked_fill with a float64 fill value) rounds the same way, so only real differences count.
    a.mismatches += !(t == r_t || (std::isnan(t) && std::isnan(r_t)));
    a.above += t > r_t;
    a.below += t < r_t;

    const bool finite = std::isfinite(t) && std::isfinite(r_t);
    if (finite) {
      if (abs_r <= c.small_value) {
        ++a.n_small;
        ++a.n_masked;
        a.small_bench_fail += err > c.small_value_atol_benchmark;
        a.small_abs_fail += err > c.small_value_atol_absolute;
      } else {
        ++a.n_normal;
        a.rel_fail += rel > c.rtol;
        a.max_rel = std::max(a.max_rel, rel);
        a.sum_rel += rel;
        a.sum_sq_masked += err * err;
      }
    } else {
      ++a.n_inf_nan;
      ++a.n_masked;
      const double tc = std::clamp(t, -T::kMax, T::kMax);  // NaN stays NaN
      const double rc = std::clamp(r_t, -T::kMax, T::kMax);
      const double re = std::fabs(tc - rc) / (abs_r + eps);
      const bool ok = re <= c.rtol || (std::isnan(t) && std::isnan(r_t));
      a.inf_nan_fail += !ok;
    }

    const double ulp = Ulp<kUlpInDouble>(t, r, c);
    if (std::isnan(ulp)) {
      a.ulp_nan = true;
    } else {
      a.ulp_max = std::max(a.ulp_max, ulp);
      a.ulp_sum += ulp;
      a.ulp_over += ulp > c.ulp_threshold;
    }
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

Accumulator AccumulateAll(v1::DType td, v1::DType rd, const void* tp, const void* rp, int64_t n,
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
  internal::ParallelFor(chunks, threads, [&](int64_t k) {
    kernel(td, rd, tp, rp, k * kChunk, std::min(n, (k + 1) * kChunk), c, eps,
           parts[static_cast<size_t>(k)]);
  });
  for (const Accumulator& part : parts) internal::Merge(total, part);
  return total;
}

template <typename T, typename R>
PairMetrics Compute(const HostTensor& tested, const HostTensor& ref, const DTypeConstants& c,
                    double eps) {
  const int64_t n = tested.numel;
  const Accumulator a = AccumulateAll(tested.dtype, ref.dtype, tested.data, ref.data, n, c, eps);
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
      cos = ScaledCosine<T, R>(tested.data, ref.data, n, a.max_abs_tested, a.max_abs_ref);
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
double Epsilon(v1::DType tested, v1::DType ref) {
  if (tested == v1::DTYPE_BFLOAT16) return 0.00390625;
  switch (ref) {
    case v1::DTYPE_FLOAT16:
      return fp::Half::kEps;
    case v1::DTYPE_BFLOAT16:
      return fp::BFloat16::kEps;
    case v1::DTYPE_FLOAT32:
      return fp::Float::kEps;
    default:
      return fp::Double::kEps;
  }
}

}  // namespace

absl::StatusOr<PairMetrics> ComputeMetrics(const HostTensor& tested, const HostTensor& reference,
                                           const DTypeConstants& constants) {
  if (tested.shape != reference.shape || tested.numel != reference.numel) {
    return absl::InvalidArgumentError(absl::StrCat("The shape of bench", Shape(reference.shape),
                                                   " and npu", Shape(tested.shape), " not equal."));
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

void Merge(Accumulator& a, const Accumulator& b) {
#define PARITY_ADD(f) a.f += b.f;
#define PARITY_MAX(f) a.f = std::max(a.f, b.f);
#define PARITY_OR(f) a.f = a.f || b.f;
  PARITY_ACCUMULATOR_FIELDS(PARITY_ADD, PARITY_MAX, PARITY_OR)
#undef PARITY_ADD
#undef PARITY_MAX
#undef PARITY_OR
  a.n_masked += b.n_masked;
}

void ScalarKernel(v1::DType td, v1::DType rd, const void* t, const void* r, int64_t begin,
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
