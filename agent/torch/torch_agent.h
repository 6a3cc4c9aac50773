// The torch half's face of one checking session: a parity_session (libparity_transport.so) with
// the host callbacks that install the hook, list the registered operators and mark the
// transport's threads. parity/agent.h's functions and torch.ops.parity hold one per process;
// tests make their own. No gRPC, protobuf, abseil or OpenSSL header.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "parity/agent.h"
#include "parity/transport.h"

namespace parity::agent {

class TorchAgent {
 public:
  // A session from a config.json's text (`config_json`) or its path; null with the reason in
  // `error` (may be null) on a configuration error, or when the transport library's ABI is not
  // the one this torch half was built for. `host_flags`: PARITY_HOST_* bits (parity/transport.h).
  static std::unique_ptr<TorchAgent> Create(const std::string* config_json,
                                            const std::string* config_path, std::string* error,
                                            uint32_t host_flags = 0);
  // A session made by `make` from this agent's host callbacks, which it may adjust (tests: a
  // session from a config struct, agent/transport/transport_internal.h). Null when `make`
  // returns null.
  static std::unique_ptr<TorchAgent> Adopt(
      const std::function<parity_session*(parity_host&)>& make);
  ~TorchAgent();  // Close(), then the session is destroyed
  TorchAgent(const TorchAgent&) = delete;
  TorchAgent& operator=(const TorchAgent&) = delete;

  void Start() { parity_session_start(session_); }
  void Stop() { parity_session_stop(session_); }
  bool Step(std::string* error);
  void UseExplicitSteps() { parity_session_use_explicit_steps(session_); }
  bool Flush(uint32_t timeout_ms) { return parity_session_flush(session_, timeout_ms) != 0; }
  void Close() { parity_session_close(session_); }
  Counters GetCounters() const;
  bool capturing() const { return parity_session_capturing(session_) != 0; }
  bool ended() const { return parity_session_ended(session_) != 0; }
  parity_session* session() const { return session_; }

  // Forgets the hook without touching the session: a forked child's (it has no sender thread).
  void ForgetInChild();

 private:
  TorchAgent();
  static void SetCapture(void* ctx, int on, uint64_t snapshot_pool_bytes);
  static char* RegisteredOps(void* ctx);
  static void FreeText(void* ctx, char* text);
  static void EnterAgentThread(void* ctx);

  parity_host host_{};
  std::string framework_version_, device_type_;
  parity_session* session_ = nullptr;
  std::mutex hook_mu_;
  uint64_t hook_ = 0;  // the installed hook's handle, 0 when none (under hook_mu_)
};

// "torch 2.1.0"; the device this process trains on as Hello names it: the accelerator its
// libtorch has (an NPU is libtorch's PrivateUse1 backend, named by torch_npu), else "cpu".
std::string FrameworkVersion();
std::string ProcessDeviceType();

}  // namespace parity::agent
