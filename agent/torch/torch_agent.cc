#include "agent/torch/torch_agent.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include <cstdlib>
#include <cstring>

#include "agent/torch/agent_hook.h"
#include "agent/torch/snapshot.h"
#include "agent/torch/snapshot_cache.h"
#include "common/torch/generator_read.h"
#include "parity/counter_fields.h"

namespace parity::agent {

std::string FrameworkVersion() { return "torch " + common::TorchVersion(); }

std::string ProcessDeviceType() {
#if TORCH_VERSION_MAJOR >= 2
  const std::string private_use = c10::get_privateuse1_backend(/*lower_case=*/true);
  if (private_use != "privateuseone") return private_use;  // a backend registered its name
#endif
  if (at::detail::getCUDAHooks().hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0) {
    return "cuda";
  }
  return "cpu";
}

TorchAgent::TorchAgent()
    : framework_version_(FrameworkVersion()), device_type_(ProcessDeviceType()) {
  host_.size = sizeof(host_);
  host_.ctx = this;
  host_.framework_version = framework_version_.c_str();
  host_.device_type = device_type_.c_str();
  host_.set_capture = &TorchAgent::SetCapture;
  host_.registered_ops = &TorchAgent::RegisteredOps;
  host_.free_text = &TorchAgent::FreeText;
  host_.enter_agent_thread = &TorchAgent::EnterAgentThread;
}

std::unique_ptr<TorchAgent> TorchAgent::Create(const std::string* config_json,
                                               const std::string* config_path, std::string* error,
                                               uint32_t host_flags) {
  if (parity_transport_abi() != PARITY_TRANSPORT_ABI) {
    const std::string why = "the transport library (" + std::string(parity_transport_version()) +
                            ") speaks ABI " + std::to_string(parity_transport_abi()) +
                            ", this agent ABI " + std::to_string(PARITY_TRANSPORT_ABI) +
                            ": install both halves from one release";
    if (error != nullptr) *error = why;
    parity_log(PARITY_LOG_ERROR, ("not started: " + why).c_str());
    return nullptr;
  }
  char message[1024] = {0};
  return Adopt([&](parity_host& host) {
    host.flags = host_flags;
    parity_session* s = parity_session_create(config_json ? config_json->c_str() : nullptr,
                                              config_path ? config_path->c_str() : nullptr, &host,
                                              message, sizeof(message));
    if (s == nullptr && error != nullptr) *error = message;
    return s;
  });
}

std::unique_ptr<TorchAgent> TorchAgent::Adopt(
    const std::function<parity_session*(parity_host&)>& make) {
  std::unique_ptr<TorchAgent> agent(new TorchAgent());
  agent->session_ = make(agent->host_);
  if (agent->session_ == nullptr) return nullptr;
  return agent;
}

TorchAgent::~TorchAgent() {
  if (session_ == nullptr) return;
  parity_session_destroy(session_);  // closes first: the hook is removed then
}

bool TorchAgent::Step(std::string* error) {
  char message[1024] = {0};
  if (parity_session_step(session_, message, sizeof(message)) != 0) return true;
  if (error != nullptr) *error = message;
  return false;
}

Counters TorchAgent::GetCounters() const {
  parity_counters c{};
  c.size = sizeof(c);
  parity_session_counters(session_, &c);
  Counters r;
#define PARITY_COPY(field) r.field = c.field;
  PARITY_AGENT_COUNTER_FIELDS(PARITY_COPY)
#undef PARITY_COPY
#define PARITY_DROPPED(reason, enumerator, why) r.dropped[#reason] = c.dropped_##reason;
  PARITY_DROP_REASONS(PARITY_DROPPED)
#undef PARITY_DROPPED
  r.connected = c.connected != 0;
  return r;
}

void TorchAgent::ForgetInChild() {
  RemoveHook(0);
  hook_ = 0;
}

void TorchAgent::SetCapture(void* ctx, int on, uint64_t snapshot_pool_bytes) {
  auto* self = static_cast<TorchAgent*>(ctx);
  std::lock_guard<std::mutex> lock(self->hook_mu_);
  if (on && self->hook_ == 0) {
    ConfigureSnapshotPool(snapshot_pool_bytes);
    ClearSnapshotCache();  // while the hook was off, writes went unseen
    self->hook_ = InstallHook(self->session_);
  } else if (!on && self->hook_ != 0) {
    RemoveHook(self->hook_);
    self->hook_ = 0;
  }
}

char* TorchAgent::RegisteredOps(void* /*ctx*/) {
  std::string text;
  for (const std::string& name : RegisteredOpNames()) {
    text += name;
    text += '\n';
  }
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void TorchAgent::FreeText(void* /*ctx*/, char* text) { std::free(text); }

void TorchAgent::EnterAgentThread(void* /*ctx*/) { MarkAgentThread(); }

}  // namespace parity::agent
