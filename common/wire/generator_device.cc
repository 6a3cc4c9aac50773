#include "common/wire/generator_device.h"

namespace parity::common {

v1::GeneratorDevice GeneratorDeviceOf(absl::string_view device_type) {
  if (device_type == "cpu") return v1::GENERATOR_DEVICE_CPU;
  if (device_type == "cuda") return v1::GENERATOR_DEVICE_CUDA;
  if (device_type == "npu") return v1::GENERATOR_DEVICE_NPU;
  if (device_type == "privateuseone") return v1::GENERATOR_DEVICE_PRIVATEUSE1;
  return v1::GENERATOR_DEVICE_OTHER;
}

v1::GeneratorDevice GeneratorDeviceOf(const v1::GeneratorState& state) {
  if (state.device() != v1::GENERATOR_DEVICE_UNSPECIFIED) return state.device();
  return GeneratorDeviceOf(state.device_type());
}

v1::GeneratorDevice GeneratorDeviceOf(const CallIdentity::Generator& generator) {
  if (generator.device != wire::kGeneratorUnspecified) {
    return static_cast<v1::GeneratorDevice>(generator.device);
  }
  return GeneratorDeviceOf(generator.device_type);
}

}  // namespace parity::common
