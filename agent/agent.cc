// The public API (parity/agent.h), its torch.ops front door for Python (torch.ops.parity.*), and
// the zero-code path: loaded with LD_PRELOAD and PARITY_CONFIG set, the agent starts itself.
// One session per process (agent/session.h), kept until the process exits.
#include "parity/agent.h"

#include <openssl/ssl.h>
#include <pthread.h>
#include <torch/library.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/session.h"
#include "common/log.h"
#include "nlohmann/json.hpp"

namespace parity::agent {
namespace {

ABSL_CONST_INIT absl::Mutex g_mu(absl::kConstInit);  // usable before static initialisation
// The process's session. Never destroyed: a late callback on another thread may still hold it,
// and the exit handler closes it before static destruction.
Session* g_session ABSL_GUARDED_BY(g_mu) = nullptr;

Session* Current() {
  absl::MutexLock lock(&g_mu);
  return g_session;
}

void CloseAtExit() { Close(); }

// A forked child (DataLoader workers) inherits the hook but not the sender thread: it must not
// capture anything, nor touch the parent's session. No lock: the child has only the forking
// thread, and g_mu may have been held by another thread of the parent at the fork.
void InChildAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  g_session = nullptr;
  RemoveHook(0);
}

// Registered once, with the first session.
void PrepareProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The agent's exit handler connects and sends over TLS (a server that comes up late, or
    // calls still queued). atexit handlers run last-registered first, and OpenSSL registers its
    // own cleanup when it is first initialised, which would be later (on the sender's first
    // connection): it then ran before ours and left TLS unusable ("ca.crt: not a PEM
    // certificate", "Could not create ssl context"). Initialised now without that cleanup, it
    // stays usable until the process ends, whatever else initialises it afterwards (the first
    // caller's options decide).
    OPENSSL_init_ssl(
        OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
        nullptr);
    std::atexit(&CloseAtExit);  // before static destruction tears libtorch down
    pthread_atfork(nullptr, nullptr, &InChildAfterFork);
  });
}

// msprobe's loop calls start() every iteration: once the session exists, resume it.
bool Resumed() {
  Session* s = Current();
  if (s != nullptr) s->Start();
  return s != nullptr;
}

bool StartWith(absl::StatusOr<common::Parsed<common::AgentConfig>> parsed, std::string* error) {
  if (!parsed.ok()) {
    if (error) *error = std::string(parsed.status().message());
    common::LogError(absl::StrCat("not started: ", parsed.status().message()));
    return false;
  }
  for (const std::string& w : parsed->warnings) common::LogWarning(w);
  common::LogLevel level;
  if (common::ParseLogLevel(parsed->config.parity.log_level, &level)) common::SetLogLevel(level);
  auto session = Session::Create(std::move(parsed->config));
  if (!session.ok()) {
    if (error) *error = std::string(session.status().message());
    return false;
  }
  PrepareProcess();
  Session* s = session->release();
  {
    absl::MutexLock lock(&g_mu);
    if (g_session != nullptr) {  // another thread started one meanwhile: use it
      delete s;
      s = g_session;
    } else {
      g_session = s;
    }
  }
  s->Start();
  return true;
}

}  // namespace

bool Start(const std::string& config_json, std::string* error) {
  common::SetLogPrefix("parity-agent");
  return Resumed() || StartWith(common::ParseAgentConfig(config_json, "config"), error);
}

bool StartFromFile(const std::string& config_path, std::string* error) {
  common::SetLogPrefix("parity-agent");
  return Resumed() || StartWith(common::LoadAgentConfig(config_path), error);
}

void Stop() {
  if (Session* s = Current()) s->Stop();
}

bool Step(std::string* error) {
  Session* s = Current();
  return s == nullptr || s->Step(error);
}

void UseExplicitSteps() {
  if (Session* s = Current()) s->UseExplicitSteps();
}

bool Flush(uint32_t timeout_ms) {
  Session* s = Current();
  return s == nullptr || s->Flush(timeout_ms);
}

void Close() {
  if (Session* s = Current()) s->Close();
}

Counters GetCounters() {
  Session* s = Current();
  return s == nullptr ? Counters{} : s->GetCounters();
}

bool IsStarted() {
  Session* s = Current();
  return s != nullptr && s->capturing();
}

void PushModule(const std::string& path) { PushModuleScope(path); }
void PopModule() { PopModuleScope(); }

namespace {

// ---- torch.ops.parity: what the Python package calls -------------------------------------------

std::string OpStart(const std::string& config_json) {
  std::string error;
  return Start(config_json, &error) ? "" : error;
}

std::string OpStep() {
  std::string error;
  return parity::agent::Step(&error) ? "" : error;
}

bool OpFlush(int64_t timeout_ms) {
  return parity::agent::Flush(static_cast<uint32_t>(std::max<int64_t>(timeout_ms, 0)));
}

std::string OpCounters() {
  const Counters c = GetCounters();
  nlohmann::json j = {{"captured", c.captured},
                      {"sent", c.sent},
                      {"sent_bytes", c.sent_bytes},
                      {"reused_bytes", c.reused_bytes},
                      {"snapshot_seconds", c.snapshot_seconds},
                      {"encode_cpu_seconds", c.encode_cpu_seconds},
                      {"serialize_cpu_seconds", c.serialize_cpu_seconds},
                      {"dropped", c.dropped},
                      {"lost_in_flight", c.lost_in_flight},
                      {"unencodable", c.unencodable},
                      {"sampled_out", c.sampled_out},
                      {"reconnects", c.reconnects},
                      {"verdicts", c.verdicts},
                      {"pass", c.pass},
                      {"warning", c.warning},
                      {"error", c.error},
                      {"skip", c.skip},
                      {"rejected", c.rejected},
                      {"unreadable", c.unreadable},
                      {"queue_depth", c.queue_depth},
                      {"step", c.step},
                      {"connected", c.connected}};
  return j.dump();
}

// The agent's configuration keys ([{"path": "tensor.host", "kind": "string"}, ...]): the Python
// front-end routes keyword overrides with them.
std::string OpConfigKeys() {
  nlohmann::json keys = nlohmann::json::array();
  for (const common::KeyDescription& k : common::AgentKeys()) {
    keys.push_back({{"path", k.path}, {"kind", k.kind}, {"doc", k.doc}});
  }
  return keys.dump();
}

bool OpIsStarted() { return IsStarted(); }
void OpExplicitSteps() { UseExplicitSteps(); }
void OpStop() { Stop(); }
void OpClose() { Close(); }
void OpPushModule(const std::string& path) { PushModule(path); }
void OpPopModule() { PopModule(); }

}  // namespace
}  // namespace parity::agent

// The agent's own ops are never captured (the hook skips the "parity::" namespace).
TORCH_LIBRARY(parity, m) {
  m.def("start(str config_json) -> str", &parity::agent::OpStart);
  m.def("stop() -> ()", &parity::agent::OpStop);
  m.def("close() -> ()", &parity::agent::OpClose);
  m.def("step() -> str", &parity::agent::OpStep);
  m.def("flush(int timeout_ms) -> bool", &parity::agent::OpFlush);
  m.def("counters() -> str", &parity::agent::OpCounters);
  m.def("is_started() -> bool", &parity::agent::OpIsStarted);
  m.def("config_keys() -> str", &parity::agent::OpConfigKeys);
  m.def("use_explicit_steps() -> ()", &parity::agent::OpExplicitSteps);
  m.def("push_module(str path) -> ()", &parity::agent::OpPushModule);
  m.def("pop_module() -> ()", &parity::agent::OpPopModule);
}

namespace {

// Whether this process is a child of the process that started the zero-code agent for the same
// rank: LD_PRELOAD and PARITY_CONFIG pass to every process a training spawns (a DataLoader's
// spawned workers, multiprocessing's resource tracker, a subprocess), and each would start an
// agent claiming the training's rank and filling its result files with its own ops. The first
// agent of a rank records "RANK:pid" in PARITY_AGENT_OWNER; a process that finds its own RANK
// there with another process's pid, still alive, is such a child. A launcher without RANK
// (torchrun's) records an empty rank, so the ranks it starts do start their agents; forked
// children never run this (they share the parent's agent, already started).
bool IsChildOfTheRanksAgent() {
  const char* rank_env = std::getenv("RANK");
  const std::string rank = rank_env != nullptr ? rank_env : "";
  const char* owner = std::getenv("PARITY_AGENT_OWNER");
  if (owner != nullptr) {
    const std::string value = owner;
    const std::size_t colon = value.rfind(':');
    if (colon != std::string::npos && value.substr(0, colon) == rank) {
      const long pid = std::strtol(value.c_str() + colon + 1, nullptr, 10);
      if (pid > 0 && pid != ::getpid() &&
          (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) {
        return true;
      }
    }
  }
  ::setenv("PARITY_AGENT_OWNER", absl::StrCat(rank, ":", ::getpid()).c_str(), /*overwrite=*/1);
  return false;
}

}  // namespace

// Zero-code path: LD_PRELOAD=libparity_agent.so PARITY_CONFIG=config.json python train.py
__attribute__((constructor)) static void ParityPreloadStart() {
  const char* path = std::getenv("PARITY_CONFIG");
  if (path == nullptr || *path == '\0') return;
  if (IsChildOfTheRanksAgent()) {
    parity::common::LogInfo(absl::StrCat(
        "pid ", ::getpid(), " was started by rank ", std::getenv("RANK") ? std::getenv("RANK") : "",
        "'s training (PARITY_AGENT_OWNER ", std::getenv("PARITY_AGENT_OWNER"),
        "): no agent here; the training's own process checks the rank"));
    return;
  }
  std::string error;
  parity::agent::StartFromFile(path, &error);  // errors are logged; the training runs on
}
