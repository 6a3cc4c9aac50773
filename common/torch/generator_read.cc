#include "common/torch/generator_read.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <cstring>
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

namespace {

bool SameEngine(const at::mt19937_data_pod& a, const at::mt19937_data_pod& b) {
  return a.seed_ == b.seed_ && a.left_ == b.left_ && a.seeded_ == b.seeded_ && a.next_ == b.next_ &&
         a.state_ == b.state_;
}

}  // namespace

void GeneratorEntry::Take(at::Generator gen) {
  cpu_ = gen.device().type() == c10::DeviceType::CPU;
  if (!cpu_) {
    device_state_ = GeneratorStateBytes(gen);
    return;
  }
  auto* impl = gen.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(gen.mutex());
  engine_ = impl->engine().data();
  const auto f = impl->next_float_normal_sample();
  const auto d = impl->next_double_normal_sample();
  has_float_ = f.has_value();
  next_float_ = f.value_or(0.0f);
  has_double_ = d.has_value();
  next_double_ = d.value_or(0.0);
}

bool GeneratorEntry::Moved(at::Generator gen) const {
  if (!cpu_) return GeneratorStateBytes(gen) != device_state_;
  auto* impl = gen.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const auto f = impl->next_float_normal_sample();
  const auto d = impl->next_double_normal_sample();
  // Bits, not values: a cached sample that is NaN, or -0.0 for +0.0, still counts as the same.
  const auto same_float = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  const auto same_double = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  return !SameEngine(impl->engine().data(), engine_) || f.has_value() != has_float_ ||
         (has_float_ && !same_float(*f, next_float_)) || d.has_value() != has_double_ ||
         (has_double_ && !same_double(*d, next_double_));
}

std::string GeneratorEntry::StateBytes() const {
  if (!cpu_) return device_state_;
  // libtorch's own serialisation of this state: a generator set to it, read back.
  auto impl = c10::make_intrusive<at::CPUGeneratorImpl>();
  at::mt19937 engine;
  engine.set_data(engine_);
  impl->set_engine(engine);
  if (has_float_) {
    impl->set_next_float_normal_sample(next_float_);
  } else {
    impl->set_next_float_normal_sample({});
  }
  if (has_double_) {
    impl->set_next_double_normal_sample(next_double_);
  } else {
    impl->set_next_double_normal_sample({});
  }
  return GeneratorStateBytes(at::Generator(std::move(impl)));
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
