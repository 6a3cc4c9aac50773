#include "common/wire/generator_device.h"

#include "parity/v1/parity.pb.h"

namespace parity::common {

wire::GeneratorDevice GeneratorDeviceOf(absl::string_view device_type) {
  if (device_type == "cpu") return wire::kGeneratorCpu;
  if (device_type == "cuda") return wire::kGeneratorCuda;
  if (device_type == "npu") return wire::kGeneratorNpu;
  if (device_type == "privateuseone") return wire::kGeneratorPrivateUse1;
  return wire::kGeneratorOther;
}

wire::GeneratorDevice GeneratorDeviceOf(const v1::GeneratorState& state) {
  if (state.device() != v1::GENERATOR_DEVICE_UNSPECIFIED) {
    return static_cast<wire::GeneratorDevice>(state.device());
  }
  return GeneratorDeviceOf(state.device_type());
}

wire::GeneratorDevice GeneratorDeviceOf(const CallIdentity::Generator& generator) {
  if (generator.device != wire::kGeneratorUnspecified) return generator.device;
  return GeneratorDeviceOf(generator.device_type);
}

}  // namespace parity::common
