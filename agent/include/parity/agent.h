// Parity agent: the C++ API of libparity_agent.so, shared by every front-end (Python package,
// LD_PRELOAD, libtorch programs). Only these functions are exported from the library.
//
//   parity::agent::StartFromFile("config.json");   // msprobe-style config (task "tensor")
//   for (...) { train_step(); parity::agent::Step(); }
//   parity::agent::Close();                         // delivers, prints counters (also at exit)
//
// Nothing here throws, and nothing the agent does inside the training process throws either:
// failures are counted, logged and reported by these functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "parity/counters.h"

#define PARITY_AGENT_API __attribute__((visibility("default")))

namespace parity::agent {

// One checking session per process, with msprobe's PrecisionDebugger semantics: start() and
// stop() may be called every iteration, step() after each.

// Begins the session with the configuration in `config_json` (the text of a config.json) and
// starts capturing; once a session exists, resumes capturing instead (the configuration passed
// again is not re-read). Returns false and fills `error` for a bad configuration. Connecting to
// the server happens in the background: a missing server is not an error here.
PARITY_AGENT_API bool Start(const std::string& config_json, std::string* error);
PARITY_AGENT_API bool StartFromFile(const std::string& config_path, std::string* error);

// Pauses capturing and returns at once: nothing waits for the server. Start() resumes.
PARITY_AGENT_API void Stop();

// Ends a training step, capturing or not. Returns false (with the first error verdict in
// `error`, may be null) when parity.fail_fast is set and an error verdict has arrived. Once the
// step passes the last step the config's `step` lists, the session ends (capture stops; what is
// queued is delivered in the background).
PARITY_AGENT_API bool Step(std::string* error = nullptr);

// Step boundaries come only from Step() from now on (the front-ends that call Step() say so at
// start). Otherwise, until the first Step(), each optimizer.step() ends a step.
PARITY_AGENT_API void UseExplicitSteps();

// Waits until every captured call has been sent and answered, at most `timeout_ms`.
PARITY_AGENT_API bool Flush(uint32_t timeout_ms);

// Ends the session: delivers what is queued (at most parity.flush_timeout_ms in all; not at all
// when nothing can be delivered), closes the stream and logs the counters. Capture stays off for
// the rest of the process. Runs by itself at process exit. Idempotent.
PARITY_AGENT_API void Close();

PARITY_AGENT_API Counters GetCounters();
// Whether a session is capturing now (started, not paused, not ended).
PARITY_AGENT_API bool IsStarted();

// Module scope for names in the results ("model.layers.0.mlp"); a per-thread stack.
PARITY_AGENT_API void PushModule(const std::string& path);
PARITY_AGENT_API void PopModule();

}  // namespace parity::agent

// msprobe's API of the Python call now running on this thread ("Functional.linear", "Tensor.add";
// null: none): the next top-level forward operator the hook sees carries it (ApiCall.api), and
// takes it. The string must live until it is replaced. A plain C function, so that the Python
// agent calls it through ctypes on every torch call it names (python/parity/_call_site.py),
// which costs far less than an operator call.
extern "C" PARITY_AGENT_API void parity_agent_set_api(const char* api);
