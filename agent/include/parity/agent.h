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

#define PARITY_AGENT_API __attribute__((visibility("default")))

namespace parity::agent {

// Once the session has ended, captured = verdicts + (sum of dropped) + lost_in_flight.
struct Counters {
  uint64_t captured = 0;    // top-level calls that passed the filters
  uint64_t sent = 0;        // calls written to the server
  uint64_t sent_bytes = 0;  // serialized bytes written
  // Tensor bytes not sent because the server kept equal bytes from an earlier call
  // (parity.reuse_bytes): named by blob id instead.
  uint64_t reused_bytes = 0;
  // Calls never written, by reason: queue_full, disconnected, stopped (still queued when the
  // session ended), communication (c10d ops, never copied). Every reason is present.
  std::map<std::string, uint64_t> dropped;
  uint64_t lost_in_flight = 0;  // written to a stream that ended before their verdicts
  uint64_t unencodable = 0;     // sent without data (a value the codec cannot encode): SKIP
  uint64_t sampled_out = 0;     // skipped by the per-signature budget
  uint64_t reconnects = 0;
  uint64_t verdicts = 0;
  uint64_t pass = 0, warning = 0, error = 0, skip = 0, rejected = 0;
  uint64_t unreadable = 0;  // messages from the server that did not parse (ignored)
  uint64_t queue_depth = 0;
  // Where the agent's time went (docs/performance.md): the training thread's time inside the
  // snapshot copies of inputs and outputs (wall clock, read around each copy), and the sender
  // thread's CPU time encoding calls and serializing messages. TLS and gRPC run on gRPC's own
  // threads and are not in these.
  double snapshot_seconds = 0, encode_cpu_seconds = 0, serialize_cpu_seconds = 0;
  // Training threads' time waiting for room in the queue (policy block): what checking every
  // call cost the training when the server fell behind.
  double blocked_seconds = 0;
  // torch.compile regions that ran (forward, backward) and the calls captured inside them: only
  // the aten operators inductor left to the dispatcher; its fused kernels are not seen.
  uint64_t compiled_forward = 0, compiled_backward = 0, compiled_calls = 0;
  int64_t step = 0;
  bool connected = false;
};

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
