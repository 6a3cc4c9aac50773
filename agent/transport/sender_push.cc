// The training threads' side of the sender (agent/transport/sender.h): Push, the policy's
// wait for room, and the breaker that bounds it to one timeout per congestion, shared by the
// ranks of a host (agent/transport/host_breaker.h). The sender thread's side is sender.cc.
#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/transport/sender.h"
#include "common/base/log.h"

namespace parity::agent {

PushResult Sender::Push(std::unique_ptr<CapturedCall> call) {
  const uint64_t bytes = call->bytes;
  // Counted before it is visible to the sender thread, which may finish it at once.
  pending_.fetch_add(1);
  if (options_.connect_at_first_call && !pushed_.load(std::memory_order_relaxed) &&
      !pushed_.exchange(true)) {
    absl::MutexLock lock(&mu_);  // the sender thread waits for this call to connect
    retry_now_.store(true);
    cv_.SignalAll();
  }
  if (options_.policy == common::QueuePolicy::kBlock && shedding_.load(std::memory_order_relaxed)) {
    ReArmIfTheServerMoves();
  }
  const PushResult r =
      WouldWait() ? PushWaiting(std::move(call), bytes) : queue_.TryPush(std::move(call), bytes);
  if (r != PushResult::kOk) pending_.fetch_sub(1);
  return r;
}

void Sender::ReArmIfTheServerMoves() {
  const bool drained = queue_.AtMostHalfFull();
  if ((drained || ServerMovesAgain()) && shedding_.exchange(false)) {
    SetHostTripped(false);
    common::LogInfo(absl::StrCat("policy block: ",
                                 drained
                                     ? "the server caught up (the agent's queue drained to half)"
                                     : absl::StrCat("the server takes calls again (", ReArmCalls(),
                                                    " since the wait ran out), at its own pace"),
                                 "; calls wait for room again"));
  }
}

PushResult Sender::PushWaiting(std::unique_ptr<CapturedCall> call, uint64_t bytes) {
  // Wait for room, but only while the server is there to make room, or may be: during the
  // first connection attempt (at most connect_timeout_ms), so that a training that starts with
  // its server does not lose its first calls to the connection's set-up. And not once another
  // rank of this host has waited out its timeout on the same server (host_breaker.h).
  const auto start = std::chrono::steady_clock::now();
  bool other_rank_tripped = false;
  const PushResult r =
      queue_.PushWait(std::move(call), bytes, std::chrono::milliseconds(options_.block_timeout_ms),
                      [this, &other_rank_tripped] {
                        if (!counters_.connected()) return first_attempt_.load();
                        other_rank_tripped = OtherRankTripped();
                        return !other_rank_tripped;
                      });
  counters_.Spent(AgentCounters::Cost::kBlocked,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (r == PushResult::kTimedOut || (r == PushResult::kFull && other_rank_tripped)) {
    Trip(/*own=*/r == PushResult::kTimedOut);
  }
  return r;
}

// The breaker: a server that took no call for a whole block_timeout_ms is not keeping up.
// Waiting that long again for every call would stall the training (and, through its
// collectives, every other rank) indefinitely; one wait per congestion is the bound.
void Sender::Trip(bool own) {
  if (!shedding_.load()) taken_at_trip_.store(taken_.load());
  if (shedding_.exchange(true)) return;
  const std::string until = absl::StrCat(
      "; dropping calls, counted as queue_full, until it takes ", ReArmCalls(),
      " calls again or the agent's queue has drained to half, so that the training does not "
      "wait again meanwhile");
  if (own) {
    SetHostTripped(true);  // the other ranks of this host need not wait it out too
    common::LogWarning(absl::StrCat("policy block: the server took no call for ",
                                    options_.block_timeout_ms, " ms (parity.block_timeout_ms)",
                                    until));
  } else {
    common::LogWarning(
        absl::StrCat("policy block: another rank on this host waited ", options_.block_timeout_ms,
                     " ms (parity.block_timeout_ms) for this server to take a call", until));
  }
}

bool Sender::OtherRankTripped() {
  absl::MutexLock lock(&breaker_mu_);
  return breaker_ != nullptr && breaker_->OtherTripped();
}

void Sender::SetHostTripped(bool tripped) {
  absl::MutexLock lock(&breaker_mu_);
  if (breaker_ != nullptr) breaker_->SetTripped(tripped);
}

void Sender::UseHostBreakerOf(const std::string& server) {
  absl::MutexLock lock(&breaker_mu_);
  if (breaker_ != nullptr && breaker_server_ == server) return;
  breaker_.reset();  // another server: this process's trip there is cleared
  breaker_server_ = server;
  breaker_ = HostBreaker::Open(server);
}

uint64_t Sender::ReArmCalls() const {
  return std::clamp<uint64_t>(options_.queue_max_calls / 4, 16, 256);
}

bool Sender::ServerMovesAgain() const {
  if (taken_.load() - taken_at_trip_.load() < ReArmCalls()) return false;
  const int64_t since_ns =
      std::chrono::steady_clock::now().time_since_epoch().count() - last_take_ns_.load();
  return since_ns < int64_t{options_.block_timeout_ms} * 500'000;  // half, in ns
}

}  // namespace parity::agent
