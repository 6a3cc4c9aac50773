// The public API (parity/agent.h), its torch.ops front door for Python (torch.ops.parity.*), and
// the zero-code path: loaded with LD_PRELOAD and PARITY_CONFIG set, the agent starts itself.
// One session per process (agent/torch/torch_agent.h), kept until the process exits.
#include "parity/agent.h"

#include <ATen/record_function.h>
#include <pthread.h>
#include <torch/library.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "agent/torch/agent_hook.h"
#include "agent/torch/deferred_start.h"
#include "agent/torch/replica_digest.h"
#include "agent/torch/torch_agent.h"
#include "nlohmann/json.hpp"
#include "parity/transport.h"

namespace parity::agent {
namespace {

std::mutex g_mu;  // constant-initialised: usable before static initialisation
// The process's session. Never destroyed: a late callback on another thread may still hold it,
// and the exit handler closes it before static destruction. Guarded by g_mu.
TorchAgent* g_agent = nullptr;

TorchAgent* Current() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_agent;
}

void CloseAtExit() { Close(); }

// A forked child (DataLoader workers) inherits the hook but not the sender thread: it must not
// capture anything, nor touch the parent's session. No lock: the child has only the forking
// thread, and g_mu may have been held by another thread of the parent at the fork.
void InChildAfterFork() {
  if (g_agent != nullptr) g_agent->ForgetInChild();
  g_agent = nullptr;
  RemoveHook(0);
}

// Registered once, with the first session.
void PrepareProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(&CloseAtExit);  // before static destruction tears libtorch down
    pthread_atfork(nullptr, nullptr, &InChildAfterFork);
  });
}

// msprobe's loop calls start() every iteration: once the session exists, resume it.
bool Resumed() {
  TorchAgent* a = Current();
  if (a != nullptr) a->Start();
  return a != nullptr;
}

bool StartWith(const std::string* json, const std::string* path, std::string* error,
               uint32_t host_flags = 0) {
  std::unique_ptr<TorchAgent> agent = TorchAgent::Create(json, path, error, host_flags);
  if (!agent) return false;
  PrepareProcess();
  TorchAgent* a = agent.release();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_agent != nullptr) {  // another thread started one meanwhile: use it
      delete a;
      a = g_agent;
    } else {
      g_agent = a;
    }
  }
  a->Start();
  return true;
}

}  // namespace

bool Start(const std::string& config_json, std::string* error) {
  return Resumed() || StartWith(&config_json, nullptr, error);
}

bool StartFromFile(const std::string& config_path, std::string* error) {
  return Resumed() || StartWith(nullptr, &config_path, error);
}

void Stop() {
  if (TorchAgent* s = Current()) s->Stop();
}

bool Step(std::string* error) {
  TorchAgent* s = Current();
  return s == nullptr || s->Step(error);
}

void UseExplicitSteps() {
  if (TorchAgent* s = Current()) s->UseExplicitSteps();
}

bool Flush(uint32_t timeout_ms) {
  TorchAgent* s = Current();
  return s == nullptr || s->Flush(timeout_ms);
}

void Close() {
  if (TorchAgent* s = Current()) s->Close();
}

Counters GetCounters() {
  TorchAgent* s = Current();
  return s == nullptr ? Counters{} : s->GetCounters();
}

bool IsStarted() {
  TorchAgent* s = Current();
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

// The problems a config.json text has, as start() would report them ("" when none).
std::string OpCheckConfig(const std::string& config_json, const std::string& source) {
  char message[8192] = {0};
  return parity_config_check(config_json.c_str(), source.c_str(), message, sizeof(message)) != 0
             ? ""
             : std::string(message);
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
                      {"blocked_seconds", c.blocked_seconds},
                      {"compiled_forward", c.compiled_forward},
                      {"compiled_backward", c.compiled_backward},
                      {"compiled_calls", c.compiled_calls},
                      {"replica_reports", c.replica_reports},
                      {"replica_pass", c.replica_pass},
                      {"replica_error", c.replica_error},
                      {"replica_skip", c.replica_skip},
                      {"replica_unsent", c.replica_unsent},
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
std::string OpConfigKeys() { return parity_config_keys_json(); }

// What this agent is and runs with: the torch it was built for, and its transport.
std::string OpBuildInfo() {
  nlohmann::json j = {
      {"agent_torch", FrameworkVersion()},           {"cxx11_abi", _GLIBCXX_USE_CXX11_ABI != 0},
      {"transport", parity_transport_version()},     {"transport_abi", parity_transport_abi()},
      {"agent_transport_abi", PARITY_TRANSPORT_ABI}, {"device_type", ProcessDeviceType()}};
  return j.dump();
}

bool OpIsStarted() { return IsStarted(); }
void OpExplicitSteps() { UseExplicitSteps(); }
void OpSetStep(int64_t step) {
  if (TorchAgent* a = Current()) parity_session_set_step(a->session(), step);
}
void OpStop() { Stop(); }
void OpEndForward() {
  if (TorchAgent* a = Current()) parity_session_end_forward(a->session());
}
void OpClose() { Close(); }
void OpPushModule(const std::string& path) { PushModule(path); }
void OpPopModule() { PopModule(); }

// A replica report (docs/replicas.md): the tensors' digests, sent for the server to compare with
// the same report of the group's other ranks. False when it was not sent (no session, or the
// session could not take it) or the digests could not be made (logged). The digests' own
// operators are not captured.
bool OpReplicaReport(c10::ArrayRef<int64_t> group, int64_t step, int64_t sequence,
                     const std::string& kind, const std::string& op, std::vector<std::string> names,
                     at::TensorList tensors) {
  TorchAgent* a = Current();
  if (a == nullptr || names.size() != tensors.size()) return false;
  TensorDigests digests;
  try {
    at::DisableRecordFunctionGuard not_captured;
    digests = DigestTensors(tensors.vec());
  } catch (const std::exception& e) {
    parity_log(PARITY_LOG_WARNING,
               ("replica digests of " + op + " not made: " + std::string(e.what())).c_str());
    return false;
  }
  std::vector<int32_t> ranks(group.begin(), group.end());
  std::vector<const char*> name_ptrs;
  for (const std::string& n : names) name_ptrs.push_back(n.c_str());
  parity_replica_report r{};
  r.size = sizeof(r);
  r.group = ranks.data();
  r.group_size = ranks.size();
  r.step = step;
  r.sequence = static_cast<uint64_t>(std::max<int64_t>(sequence, 0));
  r.kind = kind.c_str();
  r.op = op.c_str();
  r.algorithm = digests.algorithm.c_str();
  r.count = names.size();
  r.names = name_ptrs.data();
  r.digests = digests.digests.data();
  r.bytes = digests.bytes.data();
  return parity_session_report_replicas(a->session(), &r) != 0;
}

}  // namespace
}  // namespace parity::agent

// The agent's own ops are never captured (the hook skips the "parity::" namespace).
TORCH_LIBRARY(parity, m) {
  m.def("start(str config_json) -> str", &parity::agent::OpStart);
  m.def("stop() -> ()", &parity::agent::OpStop);
  m.def("end_forward() -> ()", &parity::agent::OpEndForward);
  m.def("close() -> ()", &parity::agent::OpClose);
  m.def("step() -> str", &parity::agent::OpStep);
  m.def("flush(int timeout_ms) -> bool", &parity::agent::OpFlush);
  m.def("counters() -> str", &parity::agent::OpCounters);
  m.def("is_started() -> bool", &parity::agent::OpIsStarted);
  m.def("config_keys() -> str", &parity::agent::OpConfigKeys);
  m.def("check_config(str config_json, str source) -> str", &parity::agent::OpCheckConfig);
  m.def("build_info() -> str", &parity::agent::OpBuildInfo);
  m.def("use_explicit_steps() -> ()", &parity::agent::OpExplicitSteps);
  m.def("set_step(int step) -> ()", &parity::agent::OpSetStep);
  m.def("push_module(str path) -> ()", &parity::agent::OpPushModule);
  m.def("pop_module() -> ()", &parity::agent::OpPopModule);
  m.def(
      "replica_report(int[] group, int step, int sequence, str kind, str op, str[] names, "
      "Tensor[] tensors) -> bool",
      &parity::agent::OpReplicaReport);
}

namespace {

// Who starts the zero-code agent in this process. LD_PRELOAD and PARITY_CONFIG pass to every
// process a training spawns (a DataLoader's spawned workers, multiprocessing's resource tracker,
// a subprocess), and each would start an agent claiming the training's rank and filling its
// result files with its own ops. The first agent of a rank records "RANK:pid" in
// PARITY_AGENT_OWNER; a process that finds its own RANK there with another process's pid, still
// alive, is such a child. A launcher without RANK records an empty rank: torchrun's ranks carry
// RANK and start their agents; the processes of a rank-less launcher (torch.multiprocessing.spawn's
// ranks, which learn their rank from init_process_group, but also a rank-less training's
// DataLoader workers) start theirs once they join a process group, as its rank. Forked children
// never run this (they share the parent's agent, already started).
enum class Owner { kThisProcess, kChildOfTheRank, kChildOfALauncher };

Owner WhoStartsTheAgent() {
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
        return rank.empty() ? Owner::kChildOfALauncher : Owner::kChildOfTheRank;
      }
    }
  }
  ::setenv("PARITY_AGENT_OWNER", (rank + ":" + std::to_string(::getpid())).c_str(),
           /*overwrite=*/1);
  return Owner::kThisProcess;
}

void Log(const std::string& line) { parity_log(PARITY_LOG_INFO, line.c_str()); }

// A rank of a rank-less launcher joined its process group: it becomes the rank's owner (its own
// children, DataLoader workers among them, inherit RANK and start no agent).
void StartAsGroupRank(const std::string& config_path, const parity::agent::GroupRank& group) {
  const std::string rank = std::to_string(group.rank);
  ::setenv("RANK", rank.c_str(), /*overwrite=*/0);
  ::setenv("WORLD_SIZE", std::to_string(group.world_size).c_str(), /*overwrite=*/0);
  ::setenv("PARITY_AGENT_OWNER", (rank + ":" + std::to_string(::getpid())).c_str(), 1);
  Log("pid " + std::to_string(::getpid()) + " joined its process group as rank " + rank + " of " +
      std::to_string(group.world_size) + ": its agent starts now");
  std::string error;
  parity::agent::StartFromFile(config_path, &error);  // errors are logged; the training runs on
}

}  // namespace

// Zero-code path: LD_PRELOAD=libparity_agent.so PARITY_CONFIG=config.json python train.py
__attribute__((constructor)) static void ParityPreloadStart() {
  const char* path = std::getenv("PARITY_CONFIG");
  if (path == nullptr || *path == '\0') return;
  const std::string pid = "pid " + std::to_string(::getpid());
  switch (WhoStartsTheAgent()) {
    case Owner::kChildOfTheRank:
      Log(pid + " was started by rank " + std::getenv("RANK") + "'s training (PARITY_AGENT_OWNER " +
          std::getenv("PARITY_AGENT_OWNER") +
          "): no agent here; the training's own process checks the rank");
      return;
    case Owner::kChildOfALauncher:
      Log(pid + " was started by a process without RANK (PARITY_AGENT_OWNER " +
          std::getenv("PARITY_AGENT_OWNER") +
          "): its agent starts when it joins a torch.distributed process group, as that group's "
          "rank (torch.multiprocessing.spawn); until then, and in a process that never joins "
          "one (a DataLoader worker), no agent");
      parity::agent::StartWhenInProcessGroup(
          [config = std::string(path)](const parity::agent::GroupRank& group) {
            StartAsGroupRank(config, group);
          });
      return;
    case Owner::kThisProcess:
      break;
  }
  // A process without RANK may be a launcher (torch.multiprocessing.spawn's parent, torchrun)
  // that trains nothing: its session connects at its first operator call, so that a launcher
  // is never a rank on the server nor an exit line of its own. A one-process training without
  // RANK connects then too, and checks that call like the rest.
  const char* rank = std::getenv("RANK");
  const bool rankless = rank == nullptr || *rank == '\0';
  std::string error;
  const std::string config = path;
  parity::agent::StartWith(nullptr, &config, &error,
                           rankless ? PARITY_HOST_CONNECT_AT_FIRST_CALL : 0u);  // errors logged
}

extern "C" void parity_agent_set_api(const char* api) { parity::agent::SetPendingApi(api); }
