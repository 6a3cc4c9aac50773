#include "agent/transport/counters.h"

#include "parity/v1/parity.pb.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace parity::agent {

namespace {
#define PARITY_DROP_NAME_(name, enumerator, why) #name,
#define PARITY_DROP_WHY_(name, enumerator, why) why,
constexpr const char* kDropReasonNames[kDropReasons] = {PARITY_DROP_REASONS(PARITY_DROP_NAME_)};
constexpr const char* kDropReasonWhy[kDropReasons] = {PARITY_DROP_REASONS(PARITY_DROP_WHY_)};
#undef PARITY_DROP_NAME_
#undef PARITY_DROP_WHY_
}  // namespace

const char* DropReasonName(DropReason reason) { return kDropReasonNames[static_cast<int>(reason)]; }
const char* DropReasonWhy(DropReason reason) { return kDropReasonWhy[static_cast<int>(reason)]; }

void AgentCounters::Verdict(v1::VerdictStatus status) {
  switch (status) {
    case v1::VERDICT_STATUS_PASS:
      Add(pass_);
      break;
    case v1::VERDICT_STATUS_WARNING:
      Add(warning_);
      break;
    case v1::VERDICT_STATUS_ERROR:
      Add(error_);
      break;
    case v1::VERDICT_STATUS_SKIP:
      Add(skip_);
      break;
    default:  // REJECTED, and whatever a newer server may send
      Add(rejected_);
      break;
  }
}

Counters AgentCounters::Snapshot() const {
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  Counters c;
  c.captured = get(captured_);
  c.sent = get(sent_);
  c.sent_bytes = get(sent_bytes_);
  c.reused_bytes = get(reused_bytes_);
  c.snapshot_seconds = static_cast<double>(get(cost_ns_[0])) * 1e-9;
  c.encode_cpu_seconds = static_cast<double>(get(cost_ns_[1])) * 1e-9;
  c.serialize_cpu_seconds = static_cast<double>(get(cost_ns_[2])) * 1e-9;
  c.blocked_seconds = static_cast<double>(get(cost_ns_[3])) * 1e-9;
  for (int r = 0; r < kDropReasons; ++r) {
    c.dropped[DropReasonName(static_cast<DropReason>(r))] = get(dropped_[r]);
  }
  c.lost_in_flight = get(lost_in_flight_);
  c.unencodable = get(unencodable_);
  c.sampled_out = get(sampled_out_);
  c.reconnects = get(reconnects_);
  c.pass = get(pass_);
  c.warning = get(warning_);
  c.error = get(error_);
  c.skip = get(skip_);
  c.rejected = get(rejected_);
  c.verdicts = c.pass + c.warning + c.error + c.skip + c.rejected;
  c.unreadable = get(unreadable_);
  c.compiled_forward = get(compiled_forward_);
  c.compiled_backward = get(compiled_backward_);
  c.compiled_calls = get(compiled_calls_);
  c.replica_reports = get(replica_reports_);
  c.replica_pass = get(replica_pass_);
  c.replica_error = get(replica_error_);
  c.replica_skip = get(replica_skip_);
  c.replica_unsent = get(replica_unsent_);
  c.connected = connected();
  return c;
}

void AgentCounters::FillStats(v1::AgentStats* stats) const {
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  stats->set_captured_calls(get(captured_));
  stats->set_sent_calls(get(sent_));
  stats->set_sent_bytes(get(sent_bytes_));
  auto& d = *stats->mutable_dropped_calls();
  for (int r = 0; r < kDropReasons; ++r) {
    d[DropReasonName(static_cast<DropReason>(r))] = get(dropped_[r]);
  }
  stats->set_lost_in_flight_calls(get(lost_in_flight_));
  stats->set_reconnects(get(reconnects_));
}

std::vector<std::string> SummaryLines(const Counters& c) {
  uint64_t dropped = 0;
  std::string reasons;
  for (const auto& [reason, n] : c.dropped) {
    dropped += n;
    if (n > 0) absl::StrAppend(&reasons, reasons.empty() ? " (" : ", ", reason, " ", n);
  }
  if (!reasons.empty()) reasons += ")";
  std::vector<std::string> lines = {absl::StrCat(
      "session ended at step ", c.step, ": ", c.captured, " captured, ", c.sent, " sent (",
      c.sent_bytes, " bytes), ", dropped, " dropped", reasons, ", ", c.lost_in_flight,
      " lost in flight, ", c.sampled_out, " sampled out; verdicts: ", c.pass, " pass, ", c.warning,
      " warning, ", c.error, " error, ", c.skip, " skip, ", c.rejected, " rejected; ", c.reconnects,
      " reconnects",
      c.unencodable > 0 ? absl::StrCat("; ", c.unencodable, " sent without data") : "",
      c.reused_bytes > 0
          ? absl::StrCat("; ", c.reused_bytes, " tensor bytes named again instead of resent")
          : "",
      c.unreadable > 0 ? absl::StrCat("; ", c.unreadable, " unreadable server messages") : "",
      c.compiled_forward + c.compiled_backward > 0
          ? absl::StrCat("; torch.compile: ", c.compiled_forward, " forward and ",
                         c.compiled_backward, " backward compiled-region runs, ", c.compiled_calls,
                         " calls captured inside them (inductor's fused kernels there are not "
                         "checked: docs/operators.md#torchcompile)")
          : "",
      c.blocked_seconds >= 0.001
          ? absl::StrFormat("; the training waited %.3f s for room in the queue (policy block)",
                            c.blocked_seconds)
          : "",
      c.replica_reports + c.replica_unsent > 0
          ? absl::StrCat(
                "; replicas: ", c.replica_reports, " reports sent (", c.replica_pass, " agreed, ",
                c.replica_error, " with a rank that differs, ", c.replica_skip, " not compared)",
                c.replica_unsent > 0 ? absl::StrCat(", ", c.replica_unsent, " unsent") : "")
          : "")};
  // What was not checked, and why, in words (docs/troubleshooting.md has the remedies).
  for (int r = 0; r < kDropReasons; ++r) {
    const auto reason = static_cast<DropReason>(r);
    auto it = c.dropped.find(DropReasonName(reason));
    if (it == c.dropped.end() || it->second == 0) continue;
    // Not sent for want of a server, and nothing ever sent: no server was reached, which the
    // unreachable line above explains; waiting longer would not have helped.
    const bool never_reached = reason == DropReason::kDisconnected && c.sent == 0;
    lines.push_back(absl::StrCat("not checked: ", it->second, " calls (", DropReasonName(reason),
                                 "): ", never_reached ? kNoServerReached : DropReasonWhy(reason)));
  }
  return lines;
}

}  // namespace parity::agent
