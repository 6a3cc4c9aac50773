#include "common/torch/generator_read.h"

#include <ATen/CPUGeneratorImpl.h>
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

std::string GeneratorMark(at::Generator gen) {
  if (gen.device().type() != c10::DeviceType::CPU) return GeneratorStateBytes(gen);
  auto* cpu = gen.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::mt19937_data_pod d = cpu->engine().data();
  const c10::optional<float> f = cpu->next_float_normal_sample();
  const c10::optional<double> g = cpu->next_double_normal_sample();
  std::string out;
  const auto put = [&out](const auto& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  put(d.seed_);
  put(d.left_);
  put(d.next_);
  put(d.state_[0]);
  put(f.has_value());
  put(f.value_or(0.0f));
  put(g.has_value());
  put(g.value_or(0.0));
  return out;
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
