// Every count the agent keeps, in one place: what was captured, sent, answered, and every way a
// call can be lost (one DropReason enum). Lock-free (relaxed atomics: they are statistics);
// thread-safe. Once a session has ended:
//   captured = verdicts + dropped (all reasons) + lost in flight.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/naming/drop_reasons.h"
#include "parity/counters.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

// Why a captured call was never written to a stream (common/naming/drop_reasons.h): queue_full (the
// queue was full under policy drop; under block, a wait timed out, or came after one before the
// queue drained to half), disconnected (no server to send to: past the queue's bounds, or still
// queued at the end), stopped (still queued for a connected server when the session ended),
// communication (a communication op: depends on the other ranks, never copied).
#define PARITY_DROP_ENUMERATOR_(name, enumerator, why) enumerator,
enum class DropReason { PARITY_DROP_REASONS(PARITY_DROP_ENUMERATOR_) };
#undef PARITY_DROP_ENUMERATOR_
inline constexpr int kDropReasons = PARITY_DROP_REASON_COUNT;
const char* DropReasonName(DropReason reason);  // "queue_full", ...
const char* DropReasonWhy(DropReason reason);   // in words, for the exit line
// The exit line's words for `disconnected` when nothing at all was sent.
inline constexpr char kNoServerReached[] = "no server was reached (the reason is logged above)";

// The exit line ("session ended at step N: ...") and one "not checked: N calls (<reason>): ..."
// line per reason with calls, as the session logs them when it ends.
std::vector<std::string> SummaryLines(const Counters& c);

class AgentCounters {
 public:
  void Captured() { Add(captured_); }
  void Dropped(DropReason reason, uint64_t n = 1) { Add(dropped_[static_cast<int>(reason)], n); }
  void SampledOut() { Add(sampled_out_); }
  void Sent() { Add(sent_); }                    // a call written with its data
  void SentWithoutData() { Add(unencodable_); }  // a call whose values could not be encoded
  void BytesWritten(uint64_t bytes) { Add(sent_bytes_, bytes); }  // any message
  void Reused(uint64_t bytes) { Add(reused_bytes_, bytes); }      // named, not sent again
  void LostInFlight(uint64_t n) { Add(lost_in_flight_, n); }
  void Reconnected() { Add(reconnects_); }
  void Unreadable() { Add(unreadable_); }
  void Verdict(v1::VerdictStatus status);
  void CompiledRegion(bool backward) { Add(backward ? compiled_backward_ : compiled_forward_); }
  void CompiledCall() { Add(compiled_calls_); }
  void ReplicaReported() { Add(replica_reports_); }
  void ReplicaUnsent(uint64_t n = 1) { Add(replica_unsent_, n); }
  void ReplicaVerdict(v1::VerdictStatus status) {
    Add(status == v1::VERDICT_STATUS_ERROR  ? replica_error_
        : status == v1::VERDICT_STATUS_PASS ? replica_pass_
                                            : replica_skip_);
  }
  // kBlocked: training threads' time waiting for room in the queue (policy block).
  enum class Cost { kSnapshot, kEncode, kSerialize, kBlocked };
  void Spent(Cost cost, double seconds) {
    if (seconds > 0) Add(cost_ns_[static_cast<int>(cost)], static_cast<uint64_t>(seconds * 1e9));
  }
  void SetConnected(bool connected) { connected_.store(connected, std::memory_order_relaxed); }
  bool connected() const { return connected_.load(std::memory_order_relaxed); }

  // A consistent-enough copy for the API and the exit line (each counter read once).
  Counters Snapshot() const;
  // The part the server's metrics take (AgentStats: captured, sent, dropped, lost).
  void FillStats(v1::AgentStats* stats) const;

 private:
  static void Add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> captured_{0}, sent_{0}, sent_bytes_{0}, sampled_out_{0}, reconnects_{0};
  std::atomic<uint64_t> reused_bytes_{0};
  std::array<std::atomic<uint64_t>, kDropReasons> dropped_{};
  std::atomic<uint64_t> lost_in_flight_{0}, unencodable_{0}, unreadable_{0};
  std::atomic<uint64_t> pass_{0}, warning_{0}, error_{0}, skip_{0}, rejected_{0};
  std::atomic<uint64_t> compiled_forward_{0}, compiled_backward_{0}, compiled_calls_{0};
  std::atomic<uint64_t> replica_reports_{0}, replica_pass_{0}, replica_error_{0}, replica_skip_{0};
  std::atomic<uint64_t> replica_unsent_{0};
  std::array<std::atomic<uint64_t>, 4> cost_ns_{};  // by Cost
  std::atomic<bool> connected_{false};
};

}  // namespace parity::agent
