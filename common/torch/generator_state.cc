#include "common/torch/generator_state.h"

#include <torch/version.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"

namespace parity::common {

std::string TorchVersion() {
  return absl::StrCat(TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".", TORCH_VERSION_PATCH);
}

std::string GeneratorStateBytes(at::Generator gen) {
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  state = state.contiguous();
  return std::string(static_cast<const char*>(state.data_ptr()),
                     static_cast<std::size_t>(state.numel() * state.element_size()));
}

v1::GeneratorState ReadGeneratorState(at::Generator gen) {
  v1::GeneratorState s;
  s.set_device_type(c10::DeviceTypeName(gen.device().type(), /*lower_case=*/true));
  s.set_device_index(gen.device().index());
  s.set_state(GeneratorStateBytes(gen));
  s.set_torch_version(TorchVersion());
  return s;
}

absl::StatusOr<at::Generator> DefaultGenerator(const c10::Device& device) {
  try {
    return at::globalContext().defaultGenerator(device);
  } catch (const std::exception& e) {
    return absl::UnimplementedError(
        absl::StrCat("no default generator for ", device.str(), ": ", e.what()));
  }
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
