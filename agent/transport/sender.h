// The agent's pipeline: one sender thread drains the queue, hands each call to the torch half's
// encoder (never on a training thread), batches what waits together, writes it on the
// connection (agent/transport/connection.h: channel, TLS, handshake, the server's limits), reports
// the counters, and reconnects with capped, jittered exponential back-off. Verdicts arrive on
// gRPC's callback threads (agent/transport/check_stream.h says why the stream is a
// ClientBidiReactor). The training threads' side (Push, the wait for room, the breaker) is in
// sender_push.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/transport/bounded_queue.h"
#include "agent/transport/captured_call.h"
#include "agent/transport/connection.h"
#include "agent/transport/counters.h"
#include "agent/transport/host_breaker.h"
#include "common/config/config.h"
#include "parity/v1/parity.pb.h"

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace parity::agent {

struct CallEncoding;  // agent/transport/call_encoder.h
class MessagePacker;  // agent/transport/sender.cc: the items of the next message
class ReplicaRoutes;  // agent/transport/replica_routes.h

// How long the sender, woken by a call, waits for more to join it before it sends (at most
// parity.batch_calls, or half the queue's bytes, end the wait sooner; a flush, the session's
// end or a closed queue too): the training's calls reach it in batches, and each batch costs
// one wake-up, one message and one socket write. The most a call's verdict is delayed by it.
inline constexpr absl::Duration kGatherLinger = absl::Milliseconds(1);

// What the sender runs with: its keys (common::SenderKeys: queueing, batching, pacing, as the
// configuration read them), its connection's options (the link's keys, which pace its attempts
// too, and the Hello), and the hooks of the session that owns it.
struct SenderOptions : common::SenderKeys {
  // Connect when the first call is pushed, not at Start(): a process that may capture nothing
  // (a launcher of spawned ranks) never says Hello (PARITY_HOST_CONNECT_AT_FIRST_CALL).
  bool connect_at_first_call = false;
  LinkOptions link;  // the Connection's: server, TLS, timeouts, limits, this process's Hello
  // Runs first on the sender thread (the torch half's work there is never captured).
  std::function<void()> enter_thread;
  // The server refused this agent for what it is (its rank is not in the server's rank_list),
  // with the server's reason: nothing this agent captures can be checked. On the sender thread,
  // once; the sender then stops connecting.
  std::function<void(const std::string&)> on_refused;
  // A ReplicaVerdict (the comparison of a ReplicaReport this agent sent, docs/replicas.md): on a
  // gRPC callback thread, must not block.
  std::function<void(const v1::ReplicaVerdict&)> on_replica;
  // Takes each call back once it is written or dropped by the sender thread (the session's
  // CallPool); null: the call is freed.
  std::function<void(std::unique_ptr<CapturedCall>)> recycle;
  // A replica route's stream (agent/transport/replica_routes.h): its Hello says replicas_only,
  // it sends no stats and routes nothing further.
  bool replicas_only = false;
};
// The sender's part of an agent configuration, and this process's identity (run id, versions,
// config digest; `framework_version` "torch 2.1.0" and `device_type` "npu" come from the torch
// half; the caller sets rank, world size and local rank).
SenderOptions SenderOptionsFor(const common::AgentConfig& config,
                               const std::string& framework_version,
                               const std::string& device_type);

// Messages posted (Sender::Post) and not yet written, at most.
inline constexpr std::size_t kMaxPostedMessages = 1024;

class Sender {
 public:
  // `on_verdict` runs on a gRPC callback thread (must not block); `step` gives the step for the
  // periodic stats.
  Sender(SenderOptions options, AgentCounters& counters,
         std::function<void(const v1::Verdict&)> on_verdict, std::function<int64_t()> step);
  ~Sender();  // Close()

  void Start();
  // Queues a call under the policy (drop: never waits; block: waits for room while connected,
  // at most block_timeout_ms; after a wait that timed out, drops without waiting until the queue
  // has drained to half).
  PushResult Push(std::unique_ptr<CapturedCall> call);
  // Whether a Push now would wait for room (policy block, and no congestion being shed).
  bool WouldWait() const {
    return options_.policy == common::QueuePolicy::kBlock &&
           !shedding_.load(std::memory_order_relaxed);
  }
  bool HasRoom(uint64_t bytes) const { return queue_.HasRoom(bytes); }
  // Queues a message of the agent's own (a ReplicaReport) to go out on the stream, after the
  // calls queued before it; false when kMaxPostedMessages already wait (the caller counts it).
  // Never waits. When the server list resolves to several servers, a ReplicaReport goes instead
  // to the server its group picks (ReplicaRoute of the run and the group: the same on each of
  // its ranks), on a stream of its own (agent/transport/replica_routes.h).
  bool Post(std::shared_ptr<const v1::AgentMessage> message);
  // Waits until the queue is empty, every sent call has its verdict and every posted report its
  // ReplicaVerdict (a routed one's too), at most `timeout`;
  // returns at once when nothing can be delivered (unusable TLS files, a refused Hello).
  bool Flush(std::chrono::milliseconds timeout);
  // Delivers what is queued (Flush, at most flush_timeout_ms), says Goodbye, closes the stream,
  // joins. What is still queued is dropped as stopped. Idempotent.
  void Close();
  uint64_t queue_depth() const { return queue_.size(); }
  // Whether the sender waits for a first call before it connects (connect_at_first_call).
  bool connect_pending() const { return options_.connect_at_first_call && !pushed_.load(); }

 private:
  void Run();
  void RunOnce(std::chrono::steady_clock::time_point* last_stats, double* backoff_ms);
  // One connection attempt; on failure waits out the back-off (or, refused for good, stops).
  bool Reconnect(double* backoff_ms);
  void Disconnect(bool goodbye);
  // Encodes and writes `calls` in order, in as few messages as the server's limits allow (a
  // MessageBatch when it takes them); how many were written before a write failed.
  std::size_t SendCalls(std::vector<std::unique_ptr<CapturedCall>>& calls);
  // Encodes `call` into `packer` (blob releases, chunks, the call); false when a write failed.
  bool PackCall(CapturedCall& call, const CallEncoding& encoding, MessagePacker& packer);
  // Writes one packed message and counts the calls it completes (Sent / SentWithoutData).
  bool WritePacked(grpc::ByteBuffer bytes, bool more, const std::vector<bool>& completed);
  grpc::ByteBuffer SerializeForWrite(std::shared_ptr<const v1::AgentMessage> m);
  // Writes `m`; `more`: another write follows at once, so gRPC may hold this one and send both
  // together (a synchronous write otherwise waits for its own send; tests/bench/transport_bench).
  bool Write(std::shared_ptr<const v1::AgentMessage> m, bool more = false);
  void SendStats(bool goodbye);
  void WritePosted();  // the posted messages, in order, while connected
  // Policy block, shedding: whether the server took ReArmCalls() calls since the breaker tripped,
  // the last of them within half a block_timeout_ms: it moves again, at whatever pace.
  bool ServerMovesAgain() const;
  uint64_t ReArmCalls() const;
  // Policy block: the queue drained to half, or the server moves again: calls wait again.
  void ReArmIfTheServerMoves();
  // Policy block: waits for room (see Push); a wait that ran out, or another rank's trip, trips.
  PushResult PushWaiting(std::unique_ptr<CapturedCall> call, uint64_t bytes);
  // Calls are dropped without waiting from now on; `own`: this rank's wait ran out.
  void Trip(bool own);
  // The ranks of this host that stream to the same server share their breakers' trips
  // (agent/transport/host_breaker.h): whether another one's is tripped, this one's set, and the
  // segment of the server just connected to.
  bool OtherRankTripped();
  void SetHostTripped(bool tripped);
  void UseHostBreakerOf(const std::string& server);
  void OnStreamEnd();
  // Waits `d`, or until stopping (false) or a retry is asked for (true).
  bool Waiting(std::chrono::milliseconds d);

  const SenderOptions options_;
  AgentCounters& counters_;
  const std::function<void(const v1::Verdict&)> on_verdict_;
  const std::function<int64_t()> step_;
  BoundedQueue<std::unique_ptr<CapturedCall>> queue_;

  // The sender thread's own.
  std::unique_ptr<Connection> conn_;
  std::thread thread_;
  uint64_t next_blob_ = 0;
  bool unflushed_ = false;  // the last write went with `more`
  bool ever_connected_ = false;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled when stopping_, answered_ or a connection's end changes
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t answered_ ABSL_GUARDED_BY(mu_) = 0;  // verdicts received (all connections)
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;   // calls written (all connections)
  struct Posted {
    std::shared_ptr<const v1::AgentMessage> message;
    uint64_t route = 0;  // ReplicaRoute, for a ReplicaReport
  };
  std::vector<Posted> posted_ ABSL_GUARDED_BY(mu_);
  // Reports of groups whose server is another (several servers); null on a route's own sender.
  std::unique_ptr<ReplicaRoutes> routes_;
  uint64_t reports_written_ ABSL_GUARDED_BY(mu_) = 0;   // ReplicaReports written
  uint64_t reports_answered_ ABSL_GUARDED_BY(mu_) = 0;  // ReplicaVerdicts received
  // Calls pushed and not yet written or dropped (queued, or in the sender's hands).
  std::atomic<uint64_t> pending_{0};
  std::atomic<bool> first_attempt_{true};  // the first connection attempt has not ended yet
  std::atomic<bool> pushed_{false};        // a call was pushed (connect_at_first_call)
  // Policy block: a wait timed out, and since, the queue has not drained to half nor has the
  // server taken ReArmCalls() calls (ServerMovesAgain()).
  std::atomic<bool> shedding_{false};
  std::atomic<uint64_t> taken_{0};          // calls the sender took from the queue
  std::atomic<uint64_t> taken_at_trip_{0};  // taken_ when the breaker last tripped
  std::atomic<int64_t> last_take_ns_{0};    // steady clock, at the sender's last take
  std::atomic<bool> closing_{false};        // Close() has begun
  // Close() found a server that failed an earlier attempt accepting TCP again: the back-off is
  // cut short (retry_now_) and the end waits for that one more attempt (last_attempt_).
  std::atomic<bool> retry_now_{false};
  std::atomic<bool> last_attempt_{false};
  std::atomic<bool> refused_{false};  // the server refused this agent; capture stopped
  absl::Mutex breaker_mu_;
  std::unique_ptr<HostBreaker> breaker_ ABSL_GUARDED_BY(breaker_mu_);  // null: not shared
  std::string breaker_server_ ABSL_GUARDED_BY(breaker_mu_);
};

}  // namespace parity::agent
