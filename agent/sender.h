// The agent's one sender thread: drains the queue, encodes calls (protobuf building happens
// here, never on training threads), writes them on the Check stream, and reconnects with capped,
// jittered exponential back-off. A second thread per connection reads the verdicts.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/agent_core.h"
#include "agent/bounded_queue.h"

namespace grpc {
class ByteBuffer;
class Channel;
class ClientContext;
template <class W, class R>
class ClientReaderWriter;
}  // namespace grpc

namespace parity::agent {

class Sender {
 public:
  Sender(AgentCore* core, int32_t rank, int32_t world_size);
  ~Sender();  // Stop()

  void Start();
  // Flushes (at most flush_timeout_ms), says Goodbye, closes the stream, joins. Idempotent.
  void Stop();

  PushResult Push(std::unique_ptr<CapturedCall> call);
  bool HasRoom(uint64_t bytes) const { return queue_.HasRoom(bytes); }
  // Waits until the queue is empty and every sent call has its verdict.
  bool Flush(std::chrono::milliseconds timeout);
  uint64_t queue_depth() const { return queue_.size(); }

 private:
  using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  struct Connection;

  void Run();
  bool Connect();
  // channel_->WaitForConnected, given up early when the sender stops.
  bool WaitForConnected(std::chrono::milliseconds timeout);
  void Disconnect(bool goodbye);
  bool SendCall(CapturedCall& call);
  // Writes `m`; its tensor bytes are sent from its own memory, which the stream keeps alive.
  // `more`: another write follows at once, so gRPC may hold this one and send both together (a
  // synchronous write otherwise waits for its own send; measured by tests/bench/transport_bench).
  bool Write(std::shared_ptr<const v1::AgentMessage> m, bool more = false);
  void SendStats(bool goodbye);
  void ReadLoop(Connection* c);
  v1::AgentStats Stats() const;
  bool Waiting(std::chrono::milliseconds d);  // false when stopping

  AgentCore* const core_;
  const int32_t rank_, world_size_;
  BoundedQueue<std::unique_ptr<CapturedCall>> queue_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Connection> conn_;  // sender thread only (Stop cancels through cancel_mu_)
  std::thread thread_;
  uint64_t max_inline_bytes_ = 0;
  uint64_t next_blob_ = 0;
  bool unflushed_ = false;  // the last write went with `more`
  bool ever_connected_ = false;
  std::string last_error_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ = false;
  bool started_ = false;
  uint64_t answered_ = 0;  // verdicts received
  uint64_t written_ = 0;   // calls written
  // Calls pushed and not yet written or dropped (queued, or in the sender's hands).
  std::atomic<uint64_t> pending_{0};
  // The last connection attempt failed in a way retrying cannot fix (TLS material, a refused
  // Hello): the end of the session does not wait for a delivery that cannot happen.
  std::atomic<bool> undeliverable_{false};
  std::atomic<bool> closing_{false};             // Stop() has begun
  grpc::ClientContext* live_context_ = nullptr;  // for TryCancel from Stop()
};

}  // namespace parity::agent
