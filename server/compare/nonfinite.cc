#include "server/compare/nonfinite.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/compare/float_types.h"

namespace parity::server {
namespace {

template <typename T, typename R>
std::optional<NonFinite> Scan(const HostTensor& t, const HostTensor& r) {
  NonFinite n;
  for (int64_t i = 0; i < t.numel; ++i) {
    const double d = T::Load(t.data, i);
    if (std::isfinite(d)) continue;
    const double ref = R::Load(r.data, i);
    // A reference beyond the device dtype's range overflows there too: the device is right.
    if (!std::isfinite(ref) || std::fabs(ref) > T::kMax) continue;
    if (n.count++ == 0) {
      n.first_index = i;
      n.device = d;
      n.reference = ref;
    }
  }
  if (n.count == 0) return std::nullopt;
  return n;
}

template <typename T>
std::optional<NonFinite> WithReference(const HostTensor& t, const HostTensor& r) {
  switch (r.dtype) {
    case v1::DTYPE_FLOAT16:
      return Scan<T, fp::Half>(t, r);
    case v1::DTYPE_BFLOAT16:
      return Scan<T, fp::BFloat16>(t, r);
    case v1::DTYPE_FLOAT32:
      return Scan<T, fp::Float>(t, r);
    case v1::DTYPE_FLOAT64:
      return Scan<T, fp::Double>(t, r);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<NonFinite> FindDeviceNonFinite(const HostTensor& device,
                                             const HostTensor& reference) {
  if (device.numel != reference.numel || device.data == nullptr || reference.data == nullptr) {
    return std::nullopt;
  }
  switch (device.dtype) {
    case v1::DTYPE_FLOAT16:
      return WithReference<fp::Half>(device, reference);
    case v1::DTYPE_BFLOAT16:
      return WithReference<fp::BFloat16>(device, reference);
    case v1::DTYPE_FLOAT32:
      return WithReference<fp::Float>(device, reference);
    case v1::DTYPE_FLOAT64:
      return WithReference<fp::Double>(device, reference);
    default:
      return std::nullopt;
  }
}

std::string NonFiniteMessage(const NonFinite& n) {
  return absl::StrCat("device output has ", n.count,
                      " inf/NaN where the reference is finite (first at element ", n.first_index,
                      ": ", n.device, ", reference ", n.reference, ")");
}

}  // namespace parity::server
