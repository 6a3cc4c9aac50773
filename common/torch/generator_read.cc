#include "common/torch/generator_read.h"

#include <torch/version.h>

#include <mutex>

#include "common/torch/torch_pch.h"

namespace parity::common {

std::string TorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
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

std::optional<at::Generator> DefaultGeneratorOf(const c10::Device& device, std::string* error) {
  try {
    return at::globalContext().defaultGenerator(device);
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
    return std::nullopt;
  }
}

}  // namespace parity::common
