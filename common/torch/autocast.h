// Autocast state per device type, for the agent (what was active at a call) and the server
// (replaying the bench under the same state). One place for libtorch's API, which changed
// between releases: 1.13 has per-device functions for CPU, CUDA and XPU; 2.0-2.3 add
// PrivateUse1 (the backend an Ascend NPU registers as); 2.4 folds them into functions taking the
// device type. Include only from torch translation units.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#include <optional>

#define PARITY_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace parity::common {

// Whether this libtorch has an autocast state for `device`.
inline bool HasAutocast(c10::DeviceType device) {
  switch (device) {
    case c10::DeviceType::CPU:
    case c10::DeviceType::CUDA:
    case c10::DeviceType::XPU:
      return true;
#if PARITY_TORCH_AT_LEAST(2, 0)
    case c10::DeviceType::PrivateUse1:
      return true;
#endif
    default:
      return false;
  }
}

// The dtype autocast casts to on `device` in this thread, when autocast is on there.
inline std::optional<at::ScalarType> ActiveAutocast(c10::DeviceType device) {
  if (!HasAutocast(device)) return std::nullopt;
#if PARITY_TORCH_AT_LEAST(2, 4)
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
#else
  switch (device) {
    case c10::DeviceType::CPU:
      if (at::autocast::is_cpu_enabled()) return at::autocast::get_autocast_cpu_dtype();
      break;
    case c10::DeviceType::CUDA:
      if (at::autocast::is_enabled()) return at::autocast::get_autocast_gpu_dtype();
      break;
    case c10::DeviceType::XPU:
      if (at::autocast::is_xpu_enabled()) return at::autocast::get_autocast_xpu_dtype();
      break;
#if PARITY_TORCH_AT_LEAST(2, 0)
    case c10::DeviceType::PrivateUse1:
      if (at::autocast::is_privateuseone_enabled()) {
        return at::autocast::get_autocast_privateuseone_dtype();
      }
      break;
#endif
    default:
      break;
  }
  return std::nullopt;
#endif
}

// Sets autocast on `device` in this thread: on with `dtype`, or off when it is empty; the
// previous state comes back at the end of the scope.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, std::optional<at::ScalarType> dtype)
      : device_(device), active_(HasAutocast(device)) {
    if (!active_) return;
    saved_ = ActiveAutocast(device);
    saved_dtype_ = Dtype();
    Set(dtype.has_value(), dtype.value_or(saved_dtype_));
  }
  ~AutocastScope() {
    if (active_) Set(saved_.has_value(), saved_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::ScalarType Dtype() const {
#if PARITY_TORCH_AT_LEAST(2, 4)
    return at::autocast::get_autocast_dtype(device_);
#else
    switch (device_) {
      case c10::DeviceType::CUDA:
        return at::autocast::get_autocast_gpu_dtype();
      case c10::DeviceType::XPU:
        return at::autocast::get_autocast_xpu_dtype();
#if PARITY_TORCH_AT_LEAST(2, 0)
      case c10::DeviceType::PrivateUse1:
        return at::autocast::get_autocast_privateuseone_dtype();
#endif
      default:
        return at::autocast::get_autocast_cpu_dtype();
    }
#endif
  }
  void Set(bool enabled, at::ScalarType dtype) const {
#if PARITY_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::set_autocast_enabled(device_, enabled);
#else
    switch (device_) {
      case c10::DeviceType::CUDA:
        at::autocast::set_autocast_gpu_dtype(dtype);
        at::autocast::set_enabled(enabled);
        break;
      case c10::DeviceType::XPU:
        at::autocast::set_autocast_xpu_dtype(dtype);
        at::autocast::set_xpu_enabled(enabled);
        break;
#if PARITY_TORCH_AT_LEAST(2, 0)
      case c10::DeviceType::PrivateUse1:
        at::autocast::set_autocast_privateuseone_dtype(dtype);
        at::autocast::set_privateuseone_enabled(enabled);
        break;
#endif
      default:
        at::autocast::set_autocast_cpu_dtype(dtype);
        at::autocast::set_cpu_enabled(enabled);
        break;
    }
#endif
  }

  const c10::DeviceType device_;
  const bool active_;
  std::optional<at::ScalarType> saved_;
  at::ScalarType saved_dtype_ = at::kBFloat16;
};

}  // namespace parity::common
