// The RecordFunction hook: keeps the top-level operator of each call, copies its inputs at entry
// and its outputs at exit, and hands the call to the session (through parity/transport.h). It
// runs on training threads, so it does only what must happen there: name (the session does),
// snapshot, hand over. Encoding happens on the sender's thread, I/O on gRPC's. No exception
// leaves its callbacks. Part of the torch half: no gRPC, protobuf, abseil or OpenSSL header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity/transport.h"

namespace parity::agent {

// Sends every top-level call to `session` until RemoveHook(handle). One session at a time.
uint64_t InstallHook(parity_session* session);
void RemoveHook(uint64_t handle);
// Marks the calling thread as the agent's own: its ops are never captured.
void MarkAgentThread();
// The module scope stack of the calling thread (results name module paths).
void PushModuleScope(const std::string& path);
void PopModuleScope();
// This thread's pending msprobe API (parity_agent_set_api).
void SetPendingApi(const char* api);
// Every operator the dispatcher knows now ("aten::add", "npu::npu_rms_norm").
std::vector<std::string> RegisteredOpNames();

}  // namespace parity::agent
