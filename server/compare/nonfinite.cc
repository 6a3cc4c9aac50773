#include "server/compare/nonfinite.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/wire/dtype.h"
#include "server/compare/accumulate.h"
#include "server/compare/device_compare.h"
#include "server/compare/element.h"

namespace parity::server {
namespace {

template <typename T, typename R>
std::optional<NonFinite> Scan(const TensorView& t, const TensorView& r) {
  NonFinite n;
  for (int64_t i = 0; i < t.numel; ++i) {
    const double d = T::Load(t.data, i);
    if (std::isfinite(d)) continue;
    const double ref = R::Load(r.data, i);
    if (!internal::DeviceAloneNonFinite<T>(d, ref)) continue;
    if (n.count++ == 0) {
      n.first_index = i;
      n.device = d;
      n.reference = ref;
    }
  }
  if (n.count == 0) return std::nullopt;
  return n;
}

// The scan on the CUDA device holding both (a failed scan, or a pair not on one device or not
// floating, finds nothing: the verdict keeps its other words).
std::optional<NonFinite> FindOnDevice(const TensorView& device, const TensorView& reference) {
  if (device.cuda_device != reference.cuda_device || !common::IsFloating(device.dtype) ||
      !common::IsFloating(reference.dtype)) {
    return std::nullopt;
  }
  internal::NonFiniteScan scan;
  const std::string error = internal::DeviceFindNonFinite(
      device.cuda_device, {internal::KindOf(device.dtype), device.data},
      {internal::KindOf(reference.dtype), reference.data}, device.numel, &scan);
  if (!error.empty() || scan.count == 0) return std::nullopt;
  return NonFinite{scan.count, scan.first_index, scan.device, scan.reference};
}

}  // namespace

std::optional<NonFinite> FindDeviceNonFinite(const TensorView& device,
                                             const TensorView& reference) {
  if (device.numel != reference.numel || device.data == nullptr || reference.data == nullptr) {
    return std::nullopt;
  }
  if (device.on_cuda() || reference.on_cuda()) return FindOnDevice(device, reference);
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
