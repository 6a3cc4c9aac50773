// One checking session per process (docs/design.md): the configuration, the filters, the call
// names, the counters and the sender. msprobe's users call start()/stop()/step() every
// iteration, so:
//   Start()  begins the session, or resumes capture after Stop() (same stream, same step
//            counter, same counters, same per-signature budget);
//   Stop()   pauses capture and returns at once (nothing waits for the server);
//   Step()   advances the step whether capturing or not;
// and the session ends at Close() (or process exit), or once the step passes the last step the
// config's `step` lists (msprobe's rule): then capture stops for good and what is queued is
// delivered in the background. Torch-free: the hook and the snapshots are the torch half's, which
// reaches the session through parity/transport.h (agent/transport/transport_capi.cc). Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/transport/call_names.h"
#include "agent/transport/call_pool.h"
#include "agent/transport/captured_call.h"
#include "agent/transport/counters.h"
#include "agent/transport/filters.h"
#include "common/config/config.h"
#include "parity/counters.h"
#include "parity/transport.h"

namespace parity::agent {

class Sender;

class Session {
 public:
  // Validates the configuration and fills in a run id when it has none. `host`: what the session
  // asks of the process (copied; its callbacks must outlive the session).
  static absl::StatusOr<std::unique_ptr<Session>> Create(common::AgentConfig config,
                                                         const parity_host& host);
  ~Session();  // Close()

  void Start();
  void Stop();
  // msprobe's forward_backward_dump_end(): forward calls are no longer captured, the backward
  // that follows still is, until Stop() or Start().
  void EndForward() { forward_ended_.store(true); }
  // Advances the step. Under parity.fail_fast, false (and the first error verdict's text in
  // `error`, may be null) once an error verdict has arrived.
  bool Step(std::string* error);
  // The current step becomes `step` (msprobe's set_init_step; steps counted before the first
  // Start()): as a step boundary, with call indices afresh.
  void SetStep(int64_t step);
  // Steps come only from Step() from now on (otherwise each optimizer.step() ends one).
  void UseExplicitSteps();
  // Waits until every captured call is delivered and answered, at most `timeout_ms`.
  bool Flush(uint32_t timeout_ms);
  // Ends the session: delivers what is queued (at most parity.flush_timeout_ms in all, nothing
  // when nothing can be delivered), closes the stream, logs the summary. Idempotent.
  void Close();

  Counters GetCounters() const;
  bool capturing() const;  // started, not paused, not ended
  bool ended() const;
  const common::AgentConfig& config() const { return config_; }

  // Training threads (parity/transport.h says what each does).
  // Names the call and decides whether to capture it: null if not; else the call with its
  // metadata, and in `flags` what to attach (PARITY_CALL_*).
  std::unique_ptr<CapturedCall> Begin(const parity_call_site& site, uint32_t* flags);
  bool Admit(uint64_t bytes);
  void Capture(std::unique_ptr<CapturedCall> call);
  // A call that drew random numbers although no catalogue lists its operator as random
  // (parity.detect_random): logged once per operator.
  void NoteUndeclaredRandom(const CallRecord& call);
  void OptimizerStepDone();
  void CompiledRegion(bool backward) { counters_.CompiledRegion(backward); }
  // A training's own autograd.Function (parity_session_custom_function).
  void CustomFunction(const std::string& name, int64_t sequence_nr, const std::string& module);
  bool wants_signatures() const { return !budget_.unlimited(); }
  // A replica report (docs/replicas.md): queued to go out on the stream, its step the current
  // one when negative; false when it cannot be (a rule of the report broken, e.g. a group without
  // this rank: logged with the reason, common/transport/replica_rules.h; the session not started
  // on a selected rank, or ended, or kMaxPostedMessages waiting), counted unsent.
  bool ReportReplicas(v1::ReplicaReport report);
  int32_t rank() const { return rank_; }
  // The records calls are captured in (recycled once sent; agent/transport/call_pool.h).
  CallPool& call_pool() { return pool_; }

 private:
  Session(common::AgentConfig config, const parity_host& host);
  void NewStep();
  // Installs the hook when capture is wanted now (running, not ended, and this step selected
  // or steps counted by the optimizer), removes it otherwise.
  void UpdateHook() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnVerdict(const v1::Verdict& verdict);          // on a gRPC callback thread: never blocks
  void OnRefused(const std::string& why);              // on the sender thread
  void OnReplicaVerdict(const v1::ReplicaVerdict& v);  // on a gRPC callback thread
  void EndAfterLastStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogSummary();
  void WarnAboutUnknownNames();
  void NoteCommunicationOp(const std::string& op);  // logs each op once
  // Fills a pooled record from the call site (its buffers reused), then names it (NameCall).
  void FillRecord(const parity_call_site& site, int64_t step, CallRecord* meta);
  // Sets the call's names: its call index, and a backward call's link to its forward call (or a
  // forward call's API from its call site, recorded for its backward calls).
  void NameCall(const parity_call_site& site, const std::string& op, const std::string& module,
                CallRecord* meta);

  parity_host host_{};
  std::string framework_version_, device_type_;  // host_'s strings, kept
  absl::Mutex communication_mu_;
  std::set<std::string> communication_ops_ ABSL_GUARDED_BY(communication_mu_);
  std::set<std::string> undeclared_random_ops_ ABSL_GUARDED_BY(communication_mu_);
  const common::AgentConfig config_;
  const int32_t rank_;
  const bool rank_selected_;
  CallFilter filter_;
  ScopeFilter scope_;
  SignatureBudget budget_;
  CallNames names_;
  AgentCounters counters_;
  CallPool pool_;  // before sender_: the sender gives records back until it is closed
  std::unique_ptr<Sender> sender_;  // made at the first Start() on a selected rank
  std::atomic<uint64_t> sequence_{0};
  std::atomic<bool> explicit_steps_{false};
  std::atomic<bool> forward_ended_{false};  // EndForward(): backward calls only
  std::atomic<bool> ended_{false};
  std::atomic<bool> warned_names_{false};

  mutable absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool hook_on_ ABSL_GUARDED_BY(mu_) = false;  // the host was told to capture
  bool refused_ ABSL_GUARDED_BY(mu_) = false;  // the server refused this rank
  std::thread closer_ ABSL_GUARDED_BY(mu_);    // delivers after the last configured step
  bool summarised_ ABSL_GUARDED_BY(mu_) = false;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> logged_error_ops_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::agent
