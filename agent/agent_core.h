// The agent's core: configuration, filters, counters, the RecordFunction hook and the sender.
// One instance per process, owned by agent.cc behind the public API.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/filters.h"
#include "common/config.h"
#include "common/torch/torch_pch.h"
#include "parity/agent.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

class Sender;

// A call captured on a training thread, waiting for the sender: metadata plus host snapshots.
struct CapturedCall {
  v1::ApiCall meta;  // every field but inputs/outputs
  std::vector<c10::IValue> inputs, outputs;
  uint64_t bytes = 0;
  // Accelerator tensors are snapshotted on their device (an asynchronous device-side copy, so
  // the training thread never waits for the device); the sender waits for this event, recorded
  // on the training's stream after the last copy, then copies them to the host.
  std::optional<c10::Event> device_ready;
  std::optional<c10::Device> accelerator;  // the first accelerator among the snapshots
};

// Moves every accelerator tensor in `v` to the host (tensors, lists, tuples); others unchanged.
c10::IValue ToHost(const c10::IValue& v);

// Counters shared by the hook, the sender and the API. Relaxed atomics: they are statistics.
struct AtomicCounters {
  std::atomic<uint64_t> captured{0}, sent{0}, sent_bytes{0}, sampled_out{0}, reconnects{0};
  std::atomic<uint64_t> drop_queue_full{0}, drop_disconnected{0}, drop_stopped{0};
  // Written to a stream that ended before their verdicts came: lost, not dropped.
  std::atomic<uint64_t> lost_in_flight{0};
  // Sent without their data (a value the codec cannot encode); the server answers SKIP.
  std::atomic<uint64_t> unencodable{0};
  std::atomic<uint64_t> verdicts{0}, pass{0}, warning{0}, error{0}, skip{0}, rejected{0},
      unreadable{0};
  std::atomic<bool> connected{false};
};

class AgentCore {
 public:
  static absl::StatusOr<std::unique_ptr<AgentCore>> Create(common::AgentConfig config);
  ~AgentCore();  // Stop()

  void Start();  // installs the hook and starts the sender
  void Stop();   // idempotent

  bool Step(std::string* error);
  void UseExplicitSteps() { explicit_steps_.store(true); }
  bool Flush(uint32_t timeout_ms);
  Counters GetCounters() const;

  // Called by the hook (agent_hook.cc). Thread-safe.
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  bool explicit_steps() const { return explicit_steps_.load(std::memory_order_relaxed); }
  void OptimizerStepDone();  // an Optimizer.step#... scope ended
  uint64_t NextCallIndex(const std::string& op);
  struct ForwardCall {
    std::string op, overload;
    uint64_t call_index = 0;
    uint32_t backward_calls = 0;  // backward calls linked to it so far
  };
  void RecordForward(int64_t sequence_nr, ForwardCall call);
  // The forward call whose autograd nodes include `sequence_nr`; false if unknown. Counts the
  // link: `*call` holds in backward_calls how many backward calls were linked before this one.
  bool LinkBackward(int64_t sequence_nr, ForwardCall* call);
  // Queues a captured call under the configured policy; counts drops.
  void Enqueue(std::unique_ptr<CapturedCall> call);
  // Cheap pre-check: would a call of `bytes` be dropped now? (Counts it as captured and dropped
  // if so.)
  bool AdmitOrDrop(uint64_t bytes);
  uint64_t NextSequence() { return sequence_.fetch_add(1) + 1; }

  const common::AgentConfig& config() const { return config_; }
  CallFilter& filter() { return filter_; }
  ScopeFilter& scope() { return scope_; }
  SignatureBudget& budget() { return budget_; }
  AtomicCounters& counters() { return counters_; }

  // Called by the sender when an error verdict arrives (first one per op is logged).
  void OnVerdict(const v1::Verdict& verdict);

 private:
  explicit AgentCore(common::AgentConfig config);
  void NewStep();

  const common::AgentConfig config_;
  CallFilter filter_;
  ScopeFilter scope_;
  SignatureBudget budget_;
  AtomicCounters counters_;
  std::unique_ptr<Sender> sender_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> explicit_steps_{false};
  std::atomic<uint64_t> sequence_{0};
  std::atomic<bool> started_{false}, stopped_{false};
  uint64_t hook_handle_ = 0;

  absl::Mutex mu_;
  std::unordered_map<std::string, uint64_t> call_index_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, ForwardCall> forward_by_seq_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> logged_error_ops_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  bool fail_fast_reported_ ABSL_GUARDED_BY(mu_) = false;
};

// The hook (agent_hook.cc): installs the RecordFunction callback for `core`; returns its handle.
uint64_t InstallHook(AgentCore* core);
void RemoveHook(uint64_t handle);
// Marks the calling thread as the agent's own: its ops are never captured.
void MarkAgentThread();
// Module scope stack of the calling thread.
void PushModuleScope(const std::string& path);
void PopModuleScope();

}  // namespace parity::agent
