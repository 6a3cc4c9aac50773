#include "server/compare/nonfinite.h"

#include <cmath>

#include "absl/strings/str_cat.h"

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

}  // namespace

std::optional<NonFinite> FindDeviceNonFinite(const HostTensor& device,
                                             const HostTensor& reference) {
  if (device.numel != reference.numel || device.data == nullptr || reference.data == nullptr) {
    return std::nullopt;
  }
  std::optional<NonFinite> found;
  VisitFloat(device.dtype, [&](auto t) {
    VisitFloat(reference.dtype,
               [&](auto r) { found = Scan<decltype(t), decltype(r)>(device, reference); });
  });
  return found;
}

std::string NonFiniteMessage(const NonFinite& n) {
  return absl::StrCat("device output has ", n.count,
                      " inf/NaN where the reference is finite (first at element ", n.first_index,
                      ": ", n.device, ", reference ", n.reference, ")");
}

}  // namespace parity::server
