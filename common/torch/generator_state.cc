#include "common/torch/generator_state.h"

#include "parity/v1/parity.pb.h"

#include <torch/version.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "common/wire/generator_device.h"

namespace parity::common {

v1::GeneratorState ReadGeneratorState(at::Generator gen) {
  v1::GeneratorState s;
  s.set_device_type(c10::DeviceTypeName(gen.device().type(), /*lower_case=*/true));
  s.set_device(static_cast<v1::GeneratorDevice>(GeneratorDeviceOf(s.device_type())));
  s.set_device_index(gen.device().index());
  s.set_state(GeneratorStateBytes(gen));
  s.set_torch_version(TorchVersion());
  return s;
}

absl::StatusOr<at::Generator> DefaultGenerator(const c10::Device& device) {
  std::string error;
  std::optional<at::Generator> gen = DefaultGeneratorOf(device, &error);
  if (!gen) {
    return absl::UnimplementedError(
        absl::StrCat("no default generator for ", device.str(), ": ", error));
  }
  return *gen;
}

absl::Status WriteGeneratorState(at::Generator gen, const std::string& state) {
  try {
    at::Tensor t = at::empty({static_cast<int64_t>(state.size())}, at::kByte);
    std::memcpy(t.data_ptr(), state.data(), state.size());
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator state refused: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("generator state refused: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace parity::common
