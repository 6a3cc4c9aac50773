#include "agent/agent_core.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/sender.h"
#include "common/log.h"

namespace parity::agent {
namespace {

// The process's rank: RANK (torchrun, msprobe), else 0. A process without a process group is
// rank 0 (msprobe dropped everything in that case).
int32_t EnvInt(const char* name, int32_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);  // NOLINT(runtime/int)
  return end != nullptr && *end == '\0' && n >= 0 ? static_cast<int32_t>(n) : fallback;
}

// The forward-link map and call indices are per step; a cap keeps a step with millions of
// calls from growing them without bound.
constexpr std::size_t kMaxForwardLinks = 1 << 20;

}  // namespace

AgentCore::AgentCore(common::AgentConfig config)
    : config_(std::move(config)),
      filter_(config_),
      scope_(config_.scope),
      budget_(config_.parity.max_checks_per_signature,
              config_.parity.budget_period == common::BudgetPeriod::kStep) {}

absl::StatusOr<std::unique_ptr<AgentCore>> AgentCore::Create(common::AgentConfig config) {
  if (absl::Status s = common::ValidateAgentConfig(config); !s.ok()) return s;
  if (config.parity.run_id.empty()) {
    config.parity.run_id = absl::StrCat("run-", std::time(nullptr), "-", ::getpid());
  }
  return std::unique_ptr<AgentCore>(new AgentCore(std::move(config)));
}

AgentCore::~AgentCore() { Stop(); }

void AgentCore::Start() {
  if (started_.exchange(true)) return;
  const int32_t rank = EnvInt("RANK", 0);
  int32_t world = EnvInt("WORLD_SIZE", 0);
  if (world <= rank) {
    // The server refuses a Hello whose rank is outside its world: a launcher that sets RANK
    // alone (or a WORLD_SIZE that does not fit) gets the smallest world that holds this rank.
    if (world > 0) {
      common::LogWarning(absl::StrCat("RANK ", rank, " is not below WORLD_SIZE ", world,
                                      ": reporting a world of ", rank + 1));
    }
    world = rank + 1;
  }
  if (!filter_.RankSelected(rank)) {
    common::LogInfo(absl::StrCat("rank ", rank, " is not in the config's rank list: not checked"));
    return;
  }
  if (!config_.online_run_ut) {
    common::LogWarning("tensor.online_run_ut is false: Parity only checks online; not started");
    return;
  }
  sender_ = std::make_unique<Sender>(this, rank, world);
  sender_->Start();
  hook_handle_ = InstallHook(this);
  common::LogInfo(absl::StrCat("capturing on rank ", rank, "; server ", config_.host, ":",
                               config_.port, config_.parity.plaintext ? " (plaintext)" : " (TLS)"));
}

void AgentCore::Stop() {
  if (!started_.load() || stopped_.exchange(true)) return;
  RemoveHook(hook_handle_);
  hook_handle_ = 0;
  if (sender_) sender_->Stop();
  const Counters c = GetCounters();
  uint64_t dropped = 0;
  std::string reasons;
  for (const auto& [reason, n] : c.dropped) {
    dropped += n;
    if (n > 0) absl::StrAppend(&reasons, reasons.empty() ? " (" : ", ", reason, " ", n);
  }
  if (!reasons.empty()) reasons += ")";
  common::LogInfo(absl::StrCat(
      "stopped: ", c.captured, " captured, ", c.sent, " sent (", c.sent_bytes, " bytes), ", dropped,
      " dropped", reasons, ", ", c.lost_in_flight, " lost in flight, ", c.sampled_out,
      " sampled out; verdicts: ", c.pass, " pass, ", c.warning, " warning, ", c.error, " error, ",
      c.skip, " skip, ", c.rejected, " rejected; ", c.reconnects, " reconnects",
      c.unencodable > 0 ? absl::StrCat("; ", c.unencodable, " sent without data") : "",
      c.unreadable > 0 ? absl::StrCat("; ", c.unreadable, " unreadable server messages") : ""));
}

bool AgentCore::Step(std::string* error) {
  explicit_steps_.store(true);
  NewStep();
  if (!config_.parity.fail_fast) return true;
  absl::MutexLock lock(&mu_);
  if (first_error_.empty()) return true;
  if (error) *error = first_error_;
  return false;
}

void AgentCore::OptimizerStepDone() {
  // Without explicit step() calls, the optimizer's step ends a training step.
  if (!explicit_steps_.load()) NewStep();
}

void AgentCore::NewStep() {
  step_.fetch_add(1);
  budget_.NewStep();
  scope_.NewStep();
  absl::MutexLock lock(&mu_);
  call_index_.clear();
  forward_by_seq_.clear();
}

bool AgentCore::Flush(uint32_t timeout_ms) {
  return sender_ ? sender_->Flush(std::chrono::milliseconds(timeout_ms)) : true;
}

uint64_t AgentCore::NextCallIndex(const std::string& op) {
  absl::MutexLock lock(&mu_);
  return call_index_[op]++;
}

void AgentCore::RecordForward(int64_t sequence_nr, ForwardCall call) {
  absl::MutexLock lock(&mu_);
  if (forward_by_seq_.size() >= kMaxForwardLinks) forward_by_seq_.erase(forward_by_seq_.begin());
  // Several forward ops may start at one sequence number (ops creating no node): the last
  // one before the node's creation owns it.
  forward_by_seq_[sequence_nr] = std::move(call);
}

bool AgentCore::LinkBackward(int64_t sequence_nr, ForwardCall* call) {
  absl::MutexLock lock(&mu_);
  auto it = forward_by_seq_.upper_bound(sequence_nr);
  if (it == forward_by_seq_.begin()) return false;
  --it;
  *call = it->second;
  ++it->second.backward_calls;
  return true;
}

bool AgentCore::AdmitOrDrop(uint64_t bytes) {
  if (!sender_ || config_.parity.policy == common::QueuePolicy::kBlock) return sender_ != nullptr;
  if (sender_->HasRoom(bytes)) return true;
  // Captured, and dropped before the copy: counted as both, so captured = sent + dropped.
  counters_.captured.fetch_add(1, std::memory_order_relaxed);
  (counters_.connected.load() ? counters_.drop_queue_full : counters_.drop_disconnected)
      .fetch_add(1, std::memory_order_relaxed);
  return false;
}

void AgentCore::Enqueue(std::unique_ptr<CapturedCall> call) {
  if (!sender_) return;
  if (sender_->Push(std::move(call)) != PushResult::kOk) {
    (counters_.connected.load() ? counters_.drop_queue_full : counters_.drop_disconnected)
        .fetch_add(1, std::memory_order_relaxed);
  }
}

void AgentCore::OnVerdict(const v1::Verdict& v) {
  counters_.verdicts.fetch_add(1, std::memory_order_relaxed);
  switch (v.status()) {
    case v1::VERDICT_STATUS_PASS:
      counters_.pass.fetch_add(1, std::memory_order_relaxed);
      return;
    case v1::VERDICT_STATUS_WARNING:
      counters_.warning.fetch_add(1, std::memory_order_relaxed);
      return;
    case v1::VERDICT_STATUS_SKIP:
      counters_.skip.fetch_add(1, std::memory_order_relaxed);
      return;
    case v1::VERDICT_STATUS_REJECTED:
      counters_.rejected.fetch_add(1, std::memory_order_relaxed);
      return;
    case v1::VERDICT_STATUS_ERROR:
      counters_.error.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      return;
  }
  std::string failed;
  for (const auto& o : v.outputs()) {
    if (o.status() == v1::VERDICT_STATUS_ERROR) {
      failed = absl::StrCat("output ", o.index(), " ", o.failed_metric(), " (", o.standard(), ")");
      break;
    }
  }
  const std::string text =
      absl::StrCat("precision error: ", v.api_name(), " ",
                   v.phase() == v1::PHASE_BACKWARD ? "backward" : "forward", ", step ", v.step(),
                   v.module_path().empty() ? "" : absl::StrCat(", module ", v.module_path()), ": ",
                   failed.empty() ? v.message() : failed);
  absl::MutexLock lock(&mu_);
  if (first_error_.empty()) first_error_ = text;
  const std::string op = v.api_name().substr(0, v.api_name().rfind('.'));
  if (logged_error_ops_.emplace(op, true).second) common::LogWarning(text);  // first per op
}

Counters AgentCore::GetCounters() const {
  Counters c;
  c.captured = counters_.captured.load();
  c.sent = counters_.sent.load();
  c.sent_bytes = counters_.sent_bytes.load();
  c.dropped["queue_full"] = counters_.drop_queue_full.load();
  c.dropped["disconnected"] = counters_.drop_disconnected.load();
  c.dropped["stopped"] = counters_.drop_stopped.load();
  c.lost_in_flight = counters_.lost_in_flight.load();
  c.unencodable = counters_.unencodable.load();
  c.sampled_out = counters_.sampled_out.load();
  c.reconnects = counters_.reconnects.load();
  c.verdicts = counters_.verdicts.load();
  c.pass = counters_.pass.load();
  c.warning = counters_.warning.load();
  c.error = counters_.error.load();
  c.skip = counters_.skip.load();
  c.rejected = counters_.rejected.load();
  c.unreadable = counters_.unreadable.load();
  c.queue_depth = sender_ ? sender_->queue_depth() : 0;
  c.step = step_.load();
  c.connected = counters_.connected.load();
  return c;
}

}  // namespace parity::agent
