#include "agent/transport/session.h"

#include "parity/v1/parity.pb.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/transport/sender.h"
#include "common/base/log.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/transport/tls.h"

namespace parity::agent {
namespace {

// A non-negative integer from the environment (torchrun's RANK, WORLD_SIZE, LOCAL_RANK), else
// `fallback`.
int32_t EnvInt(const char* name, int32_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);  // NOLINT(runtime/int)
  return end != nullptr && *end == '\0' && n >= 0 ? static_cast<int32_t>(n) : fallback;
}

// "aten::linear.1.backward.2" -> "aten::linear": a log key per op, whatever its call, for a
// server older than Verdict.op_name.
std::string OpOfApiName(const std::string& api) {
  std::size_t end = 0;
  while (end != std::string::npos) {
    const std::size_t dot = api.find('.', end);
    const std::size_t next = dot == std::string::npos ? api.size() : dot;
    const std::string part = api.substr(end, next - end);
    if (!part.empty() && end > 0 && absl::ascii_isdigit(part[0])) return api.substr(0, end - 1);
    end = dot == std::string::npos ? std::string::npos : dot + 1;
  }
  return api;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Create(common::AgentConfig config,
                                                         const parity_host& host) {
  if (absl::Status s = common::ValidateAgentConfig(config); !s.ok()) return s;
  // Unusable TLS files are a configuration error like any other (the training is told at
  // start, not left running unchecked with one log line). Files that go after the start are
  // the link's to report (kUndeliverable).
  if (!config.parity.link.plaintext) {
    absl::StatusOr<common::ChannelTls> tls =
        common::LoadChannelTls(config.tls_path, config.parity.link.tls_key_password_file);
    if (!tls.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor.tls_path: ", tls.status().message(),
                       " (or set parity.plaintext: true for a server without TLS)"));
    }
  }
  if (!config.parity.capture.operator_catalogue.empty()) {
    if (absl::Status s = common::AddToOperatorCatalogue(config.parity.capture.operator_catalogue);
        !s.ok()) {
      return s;
    }
  }
  if (config.parity.run_id.empty()) {
    config.parity.run_id = absl::StrCat("run-", std::time(nullptr), "-", ::getpid());
  }
  return std::unique_ptr<Session>(new Session(std::move(config), host));
}

Session::Session(common::AgentConfig config, const parity_host& host)
    : config_(std::move(config)),
      rank_(EnvInt("RANK", 0)),
      rank_selected_(CallFilter::Of(config_).RankSelected(rank_)),
      filter_(CallFilter::Of(config_)),
      scope_(config_.scope),
      budget_(config_.parity.capture.max_checks_per_signature,
              config_.parity.capture.budget_period == common::BudgetPeriod::kStep) {
  std::memcpy(&host_, &host, std::min<std::size_t>(sizeof(host_), host.size));
  host_.size = sizeof(host_);
  framework_version_ = host_.framework_version != nullptr ? host_.framework_version : "";
  device_type_ = host_.device_type != nullptr && *host_.device_type ? host_.device_type : "cpu";
}

Session::~Session() { Close(); }

void Session::Start() {
  absl::MutexLock lock(&mu_);
  if (ended_.load()) return;
  if (!started_) {
    started_ = true;
    if (!rank_selected_) {
      common::LogInfo(
          absl::StrCat("rank ", rank_, " is not in the config's rank list: not checked"));
      return;
    }
    int32_t world = EnvInt("WORLD_SIZE", 0);
    if (world <= rank_) {
      // The server refuses a Hello whose rank is outside its world: a launcher that sets RANK
      // alone (or a WORLD_SIZE that does not fit) gets the smallest world that holds this rank.
      if (world > 0) {
        common::LogWarning(absl::StrCat("RANK ", rank_, " is not below WORLD_SIZE ", world,
                                        ": reporting a world of ", rank_ + 1));
      }
      world = rank_ + 1;
    }
    SenderOptions options = SenderOptionsFor(config_, framework_version_, device_type_);
    options.connect_at_first_call = (host_.flags & PARITY_HOST_CONNECT_AT_FIRST_CALL) != 0;
    options.on_refused = [this](const std::string& why) { OnRefused(why); };
    options.on_replica = [this](const v1::ReplicaVerdict& v) { OnReplicaVerdict(v); };
    options.recycle = [this](std::unique_ptr<CapturedCall> c) { pool_.Give(std::move(c)); };
    options.enter_thread = [this] {
      if (host_.enter_agent_thread != nullptr) host_.enter_agent_thread(host_.ctx);
    };
    v1::Hello& hello = options.link.hello;
    hello.set_rank(rank_);
    hello.set_world_size(world);
    hello.set_local_rank(EnvInt("LOCAL_RANK", 0));
    sender_ = std::make_unique<Sender>(
        std::move(options), counters_, [this](const v1::Verdict& v) { OnVerdict(v); },
        [this] { return names_.step(); });
    sender_->Start();
    const std::string server = absl::StrCat(
        config_.host, ":", config_.port, config_.parity.link.plaintext ? " (plaintext)" : " (TLS)");
    if (sender_->connect_pending()) {
      // A launcher of spawned ranks runs no operator: it never connects, and ends silently.
      common::LogInfo(absl::StrCat("no RANK in this process: it checks its calls as rank ", rank_,
                                   " of ", world, ", connecting to server ", server,
                                   " at its first operator call (a launcher of "
                                   "spawned ranks, which runs none, never connects)"));
    } else {
      common::LogInfo(absl::StrCat("capturing on rank ", rank_, "; server ", server));
    }
  }
  if (!rank_selected_) return;
  forward_ended_.store(false);
  running_ = true;
  UpdateHook();
}

void Session::Stop() {
  forward_ended_.store(false);
  absl::MutexLock lock(&mu_);
  running_ = false;
  UpdateHook();
}

void Session::UseExplicitSteps() {
  explicit_steps_.store(true);
  absl::MutexLock lock(&mu_);
  UpdateHook();
}

bool Session::Step(std::string* error) {
  explicit_steps_.store(true);
  NewStep();
  if (!config_.parity.fail_fast) return true;
  absl::MutexLock lock(&mu_);
  if (first_error_.empty()) return true;
  if (error) *error = first_error_;
  return false;
}

void Session::OptimizerStepDone() {
  // Without explicit step() calls, the optimizer's step ends a training step.
  if (!explicit_steps_.load()) NewStep();
}

void Session::SetStep(int64_t step) {
  names_.SetStep(step - 1);  // NewStep() counts it
  NewStep();
}

void Session::NewStep() {
  WarnAboutUnknownNames();
  names_.NewStep();
  budget_.NewStep();
  scope_.NewStep();
  absl::MutexLock lock(&mu_);
  const std::vector<int64_t>& steps = config_.step;
  if (!steps.empty() && names_.step() > *std::max_element(steps.begin(), steps.end())) {
    EndAfterLastStep();
  } else {
    UpdateHook();
  }
}

void Session::OnRefused(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (refused_) return;
  refused_ = true;
  common::LogWarning(absl::StrCat("the server refused rank ", rank_, " (", why,
                                  "): this rank captures nothing more in this run"));
  UpdateHook();
}

void Session::UpdateHook() {
  // In unselected steps the hook costs nothing when it is off; it stays on only when steps are
  // counted by the optimizer scopes it observes.
  const bool want = running_ && !ended_.load() && rank_selected_ && !refused_ &&
                    config_.parity.capture.check_calls &&
                    (!explicit_steps_.load() || filter_.StepSelected(names_.step()));
  if (want != hook_on_ && host_.set_capture != nullptr) {
    host_.set_capture(host_.ctx, want ? 1 : 0, config_.parity.capture.snapshot_pool_bytes);
  }
  hook_on_ = want;
}

void Session::EndAfterLastStep() {
  if (ended_.exchange(true)) return;
  running_ = false;
  UpdateHook();
  common::LogInfo(absl::StrCat("step ", names_.step(),
                               " is past the last configured step: "
                               "capture ends, the rest is delivered in the background"));
  // msprobe's rule, without its wait: the training goes on while what is queued is delivered.
  if (sender_) {
    closer_ = std::thread([this] {
      sender_->Close();
      LogSummary();
    });
  }
}

bool Session::Flush(uint32_t timeout_ms) {
  return sender_ ? sender_->Flush(std::chrono::milliseconds(timeout_ms)) : true;
}

void Session::Close() {
  std::thread closer;
  {
    absl::MutexLock lock(&mu_);
    ended_.store(true);
    running_ = false;
    UpdateHook();
    closer = std::move(closer_);
  }
  if (closer.joinable()) closer.join();
  if (sender_) sender_->Close();  // idempotent
  WarnAboutUnknownNames();
  LogSummary();
}

// Once, at the end of the first step (or at the end of a session with none): by then the
// training has loaded every operator library it uses (torch_npu is often imported after the
// agent starts, and with LD_PRELOAD always is).
void Session::WarnAboutUnknownNames() {
  if (warned_names_.exchange(true)) return;
  if (config_.list.empty() && config_.scope.empty() && config_.parity.white_list.empty() &&
      config_.parity.black_list.empty()) {
    return;
  }
  std::vector<std::string> ops;
  if (host_.registered_ops != nullptr) {
    if (char* text = host_.registered_ops(host_.ctx)) {
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
        ops.emplace_back(line);
      }
      if (host_.free_text != nullptr) host_.free_text(host_.ctx, text);
    }
  }
  const common::OpNameIndex known(ops);
  std::vector<std::string> lines = filter_.UnknownNames(known);
  for (std::string& line : scope_.UnknownNames(known)) lines.push_back(std::move(line));
  for (const std::string& line : lines) common::LogWarning(line);
}

void Session::LogSummary() {
  {
    absl::MutexLock lock(&mu_);
    if (summarised_ || !started_ || !rank_selected_) return;
    summarised_ = true;
  }
  const Counters c = GetCounters();
  // A session that waited for its first call and got none (a launcher): it was never a rank.
  if (sender_ && sender_->connect_pending() && c.captured == 0) return;
  for (const std::string& line : SummaryLines(c)) common::LogInfo(line);
}

void Session::NameCall(const parity_call_site& site, const std::string& op,
                       const std::string& module, CallRecord* meta) {
  if (site.backward) {
    meta->autograd_node = site.node != nullptr ? site.node : "";
    meta->autograd_sequence_nr = site.node_sequence_nr;
    thread_local CallNames::Forward fwd;  // its buffers reused call after call
    if (names_.LinkBackward(site.node_sequence_nr, &fwd)) {
      meta->forward_op_name = fwd.op;
      meta->forward_overload = fwd.overload;
      meta->call_index = fwd.call_index;
      meta->backward_index = fwd.backward_calls;
      if (module.empty()) meta->module_path = fwd.module;
      if (!fwd.api.empty()) {
        meta->api = fwd.api;
        meta->api_index = fwd.api_index;
      }
    } else {
      meta->call_index = names_.NextCallIndex(op);
    }
  } else {
    meta->call_index = names_.NextCallIndex(op);
    // msprobe's API as the training called it, when the Python agent saw the call site.
    const bool has_api = site.size >= offsetof(parity_call_site, api) + sizeof(site.api) &&
                         site.api != nullptr && site.api[0] != '\0';
    if (has_api) {
      meta->api = site.api;
      meta->api_index = names_.NextCallIndex(meta->api);
    }
    names_.RecordForward(site.forward_sequence_nr, {op, meta->overload, meta->call_index, module,
                                                    meta->api, meta->api_index});
  }
}

void Session::CustomFunction(const std::string& name, int64_t sequence_nr,
                             const std::string& module) {
  const std::string op = "autograd::" + name;
  const std::string api = "Function." + name;
  const uint64_t index = names_.NextCallIndex(op);
  names_.RecordForward(sequence_nr, {op, "", index, module, api, names_.NextCallIndex(api)});
}

void Session::FillRecord(const parity_call_site& site, int64_t step, CallRecord* meta) {
  meta->op_name.assign(site.op != nullptr ? site.op : "");
  meta->overload.assign(site.overload != nullptr ? site.overload : "");
  meta->step = step;
  meta->phase = site.backward ? wire::kPhaseBackward : wire::kPhaseForward;
  meta->in_optimizer = site.in_optimizer != 0;
  meta->module_path.assign(site.module != nullptr ? site.module : "");
  // Named before the filters decide: forward calls are linked even when not checked, so that
  // backward names stay right.
  NameCall(site, meta->op_name, meta->module_path, meta);
}

std::unique_ptr<CapturedCall> Session::Begin(const parity_call_site& site, uint32_t* flags) {
  *flags = 0;
  if (site.backward && !config_.parity.capture.capture_backward) return nullptr;
  if (!site.backward && forward_ended_.load(std::memory_order_relaxed)) return nullptr;
  const int64_t step = names_.step();
  if (!filter_.StepSelected(step)) return nullptr;
  std::unique_ptr<CapturedCall> call = pool_.Take();
  // A call not captured after all: its record goes back to the pool.
  const auto not_captured = [&] {
    pool_.Give(std::move(call));
    return std::unique_ptr<CapturedCall>();
  };
  call->session = this;
  CallRecord* meta = &call->meta;
  FillRecord(site, step, meta);
  const std::string& op = meta->op_name;
  const common::CallNaming naming(*meta);
  if (!filter_.CallSelected(naming) || !scope_.Selected(naming)) return not_captured();
  if (site.size >= offsetof(parity_call_site, in_compiled_region) + sizeof(int32_t) &&
      site.in_compiled_region != 0) {
    counters_.CompiledCall();
  }
  meta->capture_unix_nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  // A communication op: by name (c10d), or by its schema's communicator argument (the torch
  // half reads it: torch_npu's fused ops such as npu_mm_all_reduce_base). Counted, logged once
  // per op, never copied.
  const bool communicates =
      site.size >= offsetof(parity_call_site, communicates) + sizeof(site.communicates) &&
      site.communicates != 0;
  const common::OperatorClass traits = common::ClassifyOp(op);  // one catalogue lookup
  if (traits.communication || communicates) {
    counters_.Captured();
    counters_.Dropped(DropReason::kCommunication);
    NoteCommunicationOp(op);
    return not_captured();
  }
  if (traits.never_replayed != nullptr) {  // sent without values: the server reports SKIP
    meta->skip_reason = common::NeverReplayedReason(op, *traits.never_replayed);
    return call;
  }
  if (!budget_.unlimited() && !budget_.Take(site.signature != nullptr ? site.signature : op)) {
    counters_.SampledOut();
    return not_captured();
  }
  *flags = PARITY_CALL_WITH_VALUES;
  if (config_.parity.capture.detect_input_writes) *flags |= PARITY_CALL_CHECK_INPUTS;
  if (traits.random_family != common::RandomFamily::kNone) {
    *flags |= PARITY_CALL_RANDOM;
  } else if (config_.parity.capture.detect_random) {
    *flags |= PARITY_CALL_WATCH_GENERATOR;
    call->watch_generator = true;
  }
  return call;
}

void Session::NoteCommunicationOp(const std::string& op) {
  {
    absl::MutexLock lock(&communication_mu_);
    if (!communication_ops_.insert(op).second) return;
  }
  common::LogInfo(absl::StrCat("not checked: ", op,
                               " is a communication op (its result depends on the other ranks); "
                               "its calls are counted as dropped (communication), never copied"));
}

void Session::NoteUndeclaredRandom(const CallRecord& call) {
  const std::string op = common::OpName(call.op_name, call.overload);
  {
    absl::MutexLock lock(&communication_mu_);
    if (!undeclared_random_ops_.insert(op).second) return;
  }
  common::LogWarning(absl::StrCat(
      op,
      " drew random numbers (its generator moved across the call) but no operator catalogue "
      "lists it as random: its calls are sent as random calls, replayed by the server from "
      "the generator state read at their entry, never judged as deterministic. Listed in "
      "parity.operator_catalogue with its family, it would also be judged by its draws' "
      "properties where no replay is possible (docs/operators.md#the-operator-catalogue)"));
}

bool Session::Admit(uint64_t bytes) {
  if (!sender_) return false;
  if (sender_->WouldWait() || sender_->HasRoom(bytes)) return true;
  // Captured, and dropped before the copy: counted as both.
  counters_.Captured();
  counters_.Dropped(counters_.connected() ? DropReason::kQueueFull : DropReason::kDisconnected);
  return false;
}

void Session::Capture(std::unique_ptr<CapturedCall> call) {
  call->meta.sequence = sequence_.fetch_add(1) + 1;
  counters_.Captured();
  counters_.Spent(AgentCounters::Cost::kSnapshot, call->snapshot_seconds);
  if (!sender_) {
    counters_.Dropped(DropReason::kStopped);
    pool_.Give(std::move(call));
    return;
  }
  switch (sender_->Push(std::move(call))) {
    case PushResult::kOk:
      return;
    case PushResult::kFull:
    case PushResult::kTimedOut:
      counters_.Dropped(counters_.connected() ? DropReason::kQueueFull : DropReason::kDisconnected);
      return;
    case PushResult::kClosed:
      counters_.Dropped(DropReason::kStopped);
      return;
  }
}

void Session::OnVerdict(const v1::Verdict& v) {
  counters_.Verdict(v.status());
  if (v.status() != v1::VERDICT_STATUS_ERROR) return;
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
  // The first error of each op is logged; the rest are counted.
  const std::string op = v.op_name().empty() ? OpOfApiName(v.api_name()) : v.op_name();
  if (logged_error_ops_.emplace(op, true).second) {
    common::LogWarning(text);
  }
}

Counters Session::GetCounters() const {
  Counters c = counters_.Snapshot();
  c.queue_depth = sender_ ? sender_->queue_depth() : 0;
  c.step = names_.step();
  return c;
}

bool Session::capturing() const {
  absl::MutexLock lock(&mu_);
  return running_ && !ended_.load();
}

bool Session::ended() const { return ended_.load(); }

}  // namespace parity::agent
