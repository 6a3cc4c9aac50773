// The gRPC side of one agent's Check stream (private to server/service/): a thin adapter that
// starts reads, writes, the verdict-hold alarm and the stream's finish. What a message means is
// the StreamSession's (server/service/stream_session.h); verdicts go out in the order the calls
// arrived (OrderedOutbox).
//
// Threads and ownership: gRPC runs the reactions, one read at a time, so the session's reading
// side is touched by one thread at a time without a lock. Workers deliver verdicts and admit
// parked calls on their own threads: everything both sides touch is guarded by mu_, and each
// action (read, write, finish) is decided under it and started after releasing it, as the last
// thing that thread does with the reactor. gRPC calls OnDone only after Finish(), and Finish is
// called only when no read, write, queued call, parked call or alarm remains, so the reactor
// deletes itself in OnDone with nothing left that could touch it.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/support/server_callback.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/service/ordered_outbox.h"
#include "server/service/stream_context.h"
#include "server/service/stream_session.h"

namespace parity::server {

class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                            private StreamOutput {
 public:
  // `context` must outlive the reactor.
  StreamReactor(StreamContext* context, std::string peer, uint64_t session);

  void Begin();                             // starts reading
  void Refuse(const grpc::Status& status);  // finishes at once (a revoked client, too many)

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override {}
  void OnDone() override;

 private:
  // StreamOutput: the session's answer to Hello, and its calls.
  void Answer(MessageBytes message, bool batch_verdicts, std::string who) override;
  void Queue(CallWork work) override;
  void Post(MessageBytes message) override;

  void Resume();  // a worker admitted this stream's parked call
  // Call `slot` is done: its verdict, or none with `error` (its message did not parse, or the
  // server ran out of memory), which ends the stream after the verdicts before it.
  void Deliver(uint64_t slot, CallAnswer checked);
  void ReleaseHold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAlarm();  // the hold on ready verdicts (parity.verdict_hold_ms) ended
  void EndReading(const absl::Status& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool reads_done() const { return session_.state() >= StreamState::kDraining; }
  // Whether the wanted read starts now (then it is marked reading): not while the stream's
  // unsent verdicts are over parity.max_unsent_verdict_bytes.
  bool StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the next actions under mu_, releases it, then starts them.
  void ActAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);

  StreamContext* const context_;
  bool refused_ = false;  // set before gRPC sees the reactor
  StreamSession session_;
  grpc::ByteBuffer in_;  // the message being read (the reading side's)

  absl::Mutex mu_;
  OrderedOutbox outbox_ ABSL_GUARDED_BY(mu_);
  // The message being written: filled under mu_ when a write starts (OrderedOutbox allows one
  // at a time), then gRPC's until OnWriteDone.
  grpc::ByteBuffer out_;
  // The read side: no read outstanding (kIdle), the next one to start (kWanted: the last
  // message's holds are released), one outstanding (kReading). Once the session drains, none
  // starts; an outstanding read is then discarded when it completes.
  enum class Read { kIdle, kWanted, kReading };
  Read read_ ABSL_GUARDED_BY(mu_) = Read::kIdle;
  // Holds on the next read: the reaction handling a message, and a call parked in the full
  // work queue (released when a worker admits it).
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  // A read is wanted but waits: the stream's verdicts not yet written are over
  // parity.max_unsent_verdict_bytes (its client reads them too slowly, or not at all). Counted
  // in parity_server_streams_waiting_for_reader while so.
  bool waiting_for_reader_ ABSL_GUARDED_BY(mu_) = false;
  // Ready verdicts held for company (OrderedOutbox::BatchVerdicts) are written when this alarm
  // fires, unless a write takes them first. One at a time; the stream does not finish while one
  // is set, so its callback never outlives the reactor.
  // kCancelled: nothing is held any more (every call's verdict is out or going); its callback
  // still runs, at once, before the stream may finish. kNone again once the callback ran.
  enum class Alarm { kNone, kSet, kCancelled };
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
  Alarm alarm_state_ ABSL_GUARDED_BY(mu_) = Alarm::kNone;
  absl::Status error_ ABSL_GUARDED_BY(mu_);                    // the stream's end status
  std::string who_ ABSL_GUARDED_BY(mu_) = "before its Hello";  // for logs
};

}  // namespace parity::server
