#include "agent/transport/sender.h"

#include "agent/transport/call_encoder.h"
#include "agent/transport/check_stream.h"
#include "agent/transport/replica_routes.h"
#include "agent/transport/server_list.h"
#include "agent/transport/thread_priority.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/net.h"
#include "common/transport/tls.h"
#include "common/transport/wire.h"
#include "common/wire/dtype.h"
#include "common/wire/limits.h"
#include "parity/v1/parity.grpc.pb.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace parity::agent {

Sender::Sender(SenderOptions options, AgentCounters& counters,
               std::function<void(const v1::Verdict&)> on_verdict, std::function<int64_t()> step)
    : options_(std::move(options)),
      counters_(counters),
      on_verdict_(std::move(on_verdict)),
      step_(std::move(step)),
      queue_(options_.queue_max_calls, options_.queue_max_bytes) {
  Connection::Callbacks callbacks;
  callbacks.on_verdict = on_verdict_;
  callbacks.on_answered = [this](uint64_t verdicts) {
    absl::MutexLock lock(&mu_);
    answered_ += verdicts;
    cv_.SignalAll();
  };
  callbacks.on_end = [this] { OnStreamEnd(); };
  callbacks.on_replica = [this](const v1::ReplicaVerdict& v) {
    if (options_.on_replica) options_.on_replica(v);
    absl::MutexLock lock(&mu_);
    ++reports_answered_;
    cv_.SignalAll();
  };
  callbacks.stopping = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  callbacks.closing = [this] { return closing_.load(); };
  // Calls waiting for the first attempt (policy block) wait for its connection only, not for the
  // diagnosis of its failure: at most connect_timeout_ms, as configuration.md says.
  callbacks.on_wait_over = [this] {
    if (first_attempt_.exchange(false)) queue_.Wake();
  };
  conn_ = std::make_unique<Connection>(options_.link, counters_, std::move(callbacks));
  if (!options_.replicas_only) routes_ = std::make_unique<ReplicaRoutes>(options_, step_);
}

Sender::~Sender() { Close(); }

void Sender::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

bool Sender::Waiting(std::chrono::milliseconds d) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::FromChrono(d);
  while (!stopping_ && !retry_now_.load() && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  retry_now_.store(false);
  return !stopping_;
}

void Sender::Run() {
  if (options_.enter_thread) options_.enter_thread();
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "parity-sender");  // in top, perf and gdb
#endif
  LowerThisThreadOnce(static_cast<int>(options_.link.background_nice));
  auto last_stats = std::chrono::steady_clock::now();
  double backoff_ms = options_.link.reconnect_initial_ms;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    // Nothing may end this thread but Close(): an exception (an allocation failure encoding a
    // call, say) is logged and the loop goes on, and the training with it.
    try {
      RunOnce(&last_stats, &backoff_ms);
    } catch (const std::exception& e) {
      common::LogError(absl::StrCat("sender: ", e.what(), "; going on"));
    } catch (...) {
      common::LogError("sender: unknown exception; going on");
    }
  }
  try {
    if (conn_->connected()) Disconnect(/*goodbye=*/true);
  } catch (const std::exception& e) {
    common::LogError(absl::StrCat("sender: closing the stream: ", e.what()));
  }
}

bool Sender::Reconnect(double* backoff_ms) {
  const bool closing = closing_.load();
  const bool connected = conn_->Connect(closing);
  if (closing) last_attempt_.store(false);  // made while the session ends: Flush() sees it
  if (connected) {
    // Before the first attempt is marked over: a pusher waiting for it (policy block) must
    // find the connection, not a moment with neither.
    if (ever_connected_) counters_.Reconnected();
    ever_connected_ = true;
    if (options_.policy == common::QueuePolicy::kBlock) UseHostBreakerOf(conn_->peer());
    counters_.SetConnected(true);
  }
  if (first_attempt_.exchange(false) || connected) queue_.Wake();  // blocked pushers re-check
  if (!connected && !conn_->refused().empty()) {
    // Refused for good (rank_list): the session stops capturing; no more attempts.
    if (options_.on_refused) options_.on_refused(conn_->refused());
    refused_.store(true);  // after the capture stopped: a Flush() returning sees it stopped
    Waiting(std::chrono::hours(24));
    return false;
  }
  // A server that answered the diagnosis is retried after the initial back-off.
  if (!connected && conn_->answered_afterwards()) {
    *backoff_ms = options_.link.reconnect_initial_ms;
  }
  if (!connected) {
    // Jittered exponential back-off, capped: many ranks must not reconnect in lock-step.
    static thread_local std::mt19937 rng(static_cast<uint32_t>(::getpid()));
    const double jitter = std::uniform_real_distribution<double>(0.5, 1.0)(rng);
    Waiting(std::chrono::milliseconds(static_cast<int64_t>(*backoff_ms * jitter)));
    *backoff_ms = std::min<double>(*backoff_ms * 2, options_.link.reconnect_max_ms);
    return false;
  }
  *backoff_ms = options_.link.reconnect_initial_ms;
  return true;
}

void Sender::RunOnce(std::chrono::steady_clock::time_point* last_stats, double* backoff_ms) {
  if (options_.connect_at_first_call && !pushed_.load()) {
    Waiting(std::chrono::seconds(1));  // until the first Push (or Close) signals
    return;
  }
  if (!conn_->connected() && !Reconnect(backoff_ms)) return;
  if (conn_->StreamDone()) {
    // The server ended the stream (or died): count what it never answered, then reconnect now
    // rather than at the next failed write.
    Disconnect(false);
    return;
  }
  WritePosted();
  std::unique_ptr<CapturedCall> call;
  const std::size_t limit =
      conn_->limits().accepts_batches ? std::max<uint32_t>(options_.batch_calls, 1) : 1;
  // Once a call is queued, the calls that follow it within kGatherLinger join it: one wake-up
  // of this thread, one message and one socket write for them all, not one each.
  if (queue_.PopGathered(&call, std::chrono::milliseconds(200), kGatherLinger, limit) ==
      PopResult::kItem) {
    // The calls already waiting go with it, in one message, to a server that takes batches.
    std::vector<std::unique_ptr<CapturedCall>> calls;
    calls.push_back(std::move(call));
    while (calls.size() < limit && queue_.TryPop(&call)) calls.push_back(std::move(call));
    taken_.fetch_add(calls.size());
    last_take_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    const std::size_t written = SendCalls(calls);
    if (written < calls.size()) {
      // The stream failed under them: the server went (disconnected), or the end of the session
      // cancelled it once the flush ran out (stopped).
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        stopping = stopping_;
      }
      counters_.Dropped(stopping ? DropReason::kStopped : DropReason::kDisconnected,
                        calls.size() - written);
      Disconnect(false);
    }
    // Their records go back to the session's pool (their values released there).
    if (options_.recycle) {
      for (std::unique_ptr<CapturedCall>& c : calls) options_.recycle(std::move(c));
    }
    // Written or counted as dropped: only now may Flush() consider them done.
    absl::MutexLock lock(&mu_);
    pending_.fetch_sub(calls.size());
    cv_.SignalAll();
  }
  // Stats every stats_interval_ms; sooner when a held-back write has nothing left to follow it
  // (a cleared queue), since they send it.
  const bool stats_due = std::chrono::steady_clock::now() - *last_stats >
                         std::chrono::milliseconds(options_.stats_interval_ms);
  if (conn_->connected() && (stats_due || (unflushed_ && queue_.size() == 0))) {
    SendStats(false);
    *last_stats = std::chrono::steady_clock::now();
  }
}

// On a gRPC callback thread, once per stream.
void Sender::OnStreamEnd() {
  counters_.SetConnected(false);
  absl::MutexLock lock(&mu_);
  cv_.SignalAll();
}

void Sender::Disconnect(bool goodbye) {
  if (goodbye) SendStats(true);
  conn_->Disconnect(/*quiet=*/goodbye);
  {
    absl::MutexLock lock(&mu_);
    // Verdicts of a stream that ended never come: those calls are lost, and counted so.
    counters_.LostInFlight(written_ - answered_);
    answered_ = written_;
    reports_answered_ = reports_written_;  // nor do their replica verdicts
    cv_.SignalAll();
  }
  counters_.SetConnected(false);
}

bool Sender::Write(std::shared_ptr<const v1::AgentMessage> m, bool more) {
  grpc::ByteBuffer bytes = SerializeForWrite(std::move(m));
  const std::size_t length = bytes.Length();
  unflushed_ = more;
  if (!conn_->Write(std::move(bytes), more)) return false;
  counters_.BytesWritten(length);
  return true;
}

grpc::ByteBuffer Sender::SerializeForWrite(std::shared_ptr<const v1::AgentMessage> m) {
  const double cpu_start = common::ThreadCpuSeconds();
  grpc::ByteBuffer bytes = common::SerializeShared(std::move(m));
  counters_.Spent(AgentCounters::Cost::kSerialize, common::ThreadCpuSeconds() - cpu_start);
  return bytes;
}

// The items of the next message (each a serialized AgentMessage) and the calls whose last item
// is among them (whether each went with its data). A message is the item alone or a
// MessageBatch; it stays within `max_bytes` (half the server's limit) unless one item alone is
// larger, and within the items a batch may hold.
class MessagePacker {
 public:
  // Writes one message; `more`: another write follows at once, so gRPC may hold this one and
  // send both together. `completed`: the calls it completes. False when the stream failed.
  using WriteFn =
      std::function<bool(grpc::ByteBuffer bytes, bool more, const std::vector<bool>& completed)>;
  MessagePacker(std::size_t max_bytes, WriteFn write)
      : max_bytes_(max_bytes), write_(std::move(write)) {}

  bool Add(grpc::ByteBuffer item) {
    if (!items_.empty() &&
        (item_bytes_ + item.Length() > max_bytes_ || items_.size() == common::kMaxBatchItems) &&
        !Flush(true)) {
      return false;
    }
    item_bytes_ += item.Length();
    items_.push_back(std::move(item));
    return true;
  }
  // The call whose items were just added is complete.
  void Complete(bool with_data) { completed_.push_back(with_data); }

  bool Flush(bool more) {
    if (items_.empty()) return true;
    grpc::ByteBuffer bytes = items_.size() == 1
                                 ? std::move(items_.front())
                                 : common::SerializeBatch(common::kAgentBatchField, items_);
    items_.clear();
    item_bytes_ = 0;
    if (!write_(std::move(bytes), more, completed_)) return false;
    written_ += completed_.size();
    completed_.clear();
    return true;
  }
  // The calls written so far.
  std::size_t written() const { return written_; }

 private:
  const std::size_t max_bytes_;
  const WriteFn write_;
  std::vector<grpc::ByteBuffer> items_;
  std::size_t item_bytes_ = 0;
  std::vector<bool> completed_;
  std::size_t written_ = 0;
};

bool Sender::WritePacked(grpc::ByteBuffer bytes, bool more, const std::vector<bool>& completed) {
  const std::size_t length = bytes.Length();
  unflushed_ = more;
  if (!conn_->Write(std::move(bytes), more)) return false;
  counters_.BytesWritten(length);
  for (const bool with_data : completed) {
    // A call whose data could not be encoded went out as a record only: it gets a verdict
    // (SKIP) like any other, and is counted as sent without data.
    if (with_data) {
      counters_.Sent();
    } else {
      counters_.SentWithoutData();
    }
  }
  absl::MutexLock lock(&mu_);
  written_ += completed.size();
  return true;
}

bool Sender::PackCall(CapturedCall& call, const CallEncoding& encoding, MessagePacker& packer) {
  const double cpu_start = common::ThreadCpuSeconds();
  EncodedCall encoded = EncodeCall(call, encoding, &next_blob_);
  counters_.Spent(AgentCounters::Cost::kEncode, common::ThreadCpuSeconds() - cpu_start);
  counters_.Reused(encoded.reused_bytes);
  // Releases first: the server's kept bytes stay within its cap when this call's blobs arrive.
  if (!encoded.release.empty()) {
    auto release = std::make_shared<v1::AgentMessage>();
    for (uint64_t id : encoded.release) release->mutable_release()->add_blob_ids(id);
    if (!packer.Add(SerializeForWrite(std::move(release)))) return false;
  }
  for (EncodedCall::Blob& blob : encoded.blobs) {
    for (auto& chunk : blob.chunks) {
      if (!packer.Add(SerializeForWrite(std::move(chunk)))) return false;
    }
  }
  const double serialize_start = common::ThreadCpuSeconds();
  grpc::ByteBuffer message = encoded.TakeMessage();
  counters_.Spent(AgentCounters::Cost::kSerialize, common::ThreadCpuSeconds() - serialize_start);
  if (!packer.Add(std::move(message))) return false;
  packer.Complete(encoded.with_data);
  return true;
}

std::size_t Sender::SendCalls(std::vector<std::unique_ptr<CapturedCall>>& calls) {
  CallEncoding encoding;
  const ServerLimits& limits = conn_->limits();
  encoding.max_inline_tensor_bytes = limits.max_inline_bytes;
  encoding.max_tensor_bytes = limits.max_tensor_bytes;
  encoding.checksum = options_.checksum;
  encoding.accepted_dtypes = limits.accepted_dtypes.empty() ? nullptr : &limits.accepted_dtypes;
  encoding.sent = conn_->sent();
  MessagePacker packer(limits.max_batch_bytes,
                       [this](grpc::ByteBuffer bytes, bool more, const std::vector<bool>& done) {
                         return WritePacked(std::move(bytes), more, done);
                       });
  for (std::unique_ptr<CapturedCall>& call : calls) {
    if (!PackCall(*call, encoding, packer)) return packer.written();
  }
  // Held back only while another call is queued: the sender pops it next, and its write (or,
  // failing that, the stats) sends both.
  packer.Flush(/*more=*/queue_.size() > 0);
  return packer.written();
}

void Sender::SendStats(bool goodbye) {
  if (options_.replicas_only && !goodbye) return;  // the call stream reports them
  auto m = std::make_shared<v1::AgentMessage>();
  v1::AgentStats* stats =
      goodbye ? m->mutable_goodbye()->mutable_final_stats() : m->mutable_stats();
  counters_.FillStats(stats);
  stats->set_queue_depth(queue_.size());
  stats->set_step(step_());
  Write(std::move(m));
}

bool Sender::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::ReleasableMutexLock lock(&mu_);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pending_.load() == 0 && answered_ >= written_ && reports_answered_ >= reports_written_) {
      break;
    }
    // Nothing can be delivered (TLS material unusable, or the server refused this agent): no
    // point in waiting. Nor, once the session is ending, for a server whose last connection
    // attempt failed: its reason is already in the log.
    if ((conn_->undeliverable() || refused_.load()) && !counters_.connected()) break;
    if (closing_.load() && conn_->unreachable() && !counters_.connected() &&
        !last_attempt_.load() && !options_.link.wait_for_server_at_exit) {
      break;
    }
    // The queue has its own condition variable: re-check in short slices.
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
  }
  const bool done =
      pending_.load() == 0 && answered_ >= written_ && reports_answered_ >= reports_written_;
  lock.Release();
  // Routed reports (several servers) are answered on their groups' streams.
  if (!routes_ || !done) return done;
  return routes_->Flush(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - std::chrono::steady_clock::now(), std::chrono::nanoseconds(0))));
}

void Sender::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
  }
  // From here on the whole close takes flush_timeout_ms and little more: connection attempts
  // skip their diagnosis and wait in slices, and whatever is still in flight is cancelled.
  closing_.store(true);
  // An earlier attempt found no server, and the back-off runs: if the server accepts TCP now
  // (it came back), one more attempt is made at once and waited for, rather than dropping the
  // queue on a failure that no longer holds.
  if (!counters_.connected() && conn_->unreachable() &&
      conn_->AcceptsTcp(std::chrono::milliseconds(300))) {
    absl::MutexLock lock(&mu_);
    last_attempt_.store(true);
    retry_now_.store(true);
    cv_.SignalAll();
  }
  const bool flushed = Flush(std::chrono::milliseconds(options_.flush_timeout_ms));
  // What is still queued now was not sent because no server was connected (never reached, or
  // gone), or, with one connected, because the flush ran out: the two reasons the exit line and
  // docs/troubleshooting.md#why-a-call-was-not-checked tell apart.
  const DropReason left_over =
      counters_.connected() ? DropReason::kStopped : DropReason::kDisconnected;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // A write blocked by a wedged server, or a handshake that never answers, must not hold the
    // training's exit: cancel the stream.
    if (!flushed) conn_->Cancel();
    cv_.SignalAll();
  }
  queue_.Close();
  thread_.join();
  const uint64_t cleared = queue_.Clear();
  pending_.fetch_sub(cleared);
  {
    absl::MutexLock lock(&mu_);
    pending_.fetch_sub(posted_.size());  // reports never sent: the server counts them missing
    posted_.clear();
  }
  counters_.Dropped(left_over, cleared);
  if (routes_) routes_->Close();  // nothing posts to them once the thread has ended
  absl::MutexLock lock(&breaker_mu_);
  breaker_.reset();  // this rank's trip is over; the host's segment goes with the first close
}

}  // namespace parity::agent
