#include "server/service/stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/transport/wire.h"
#include "server/metrics/metrics.h"
#include "server/service/check_service.h"
#include "server/service/grpc_bytes.h"
#include "server/service/grpc_status.h"

namespace parity::server {
namespace {

// A VerdictBatch holds at most this many verdicts and bytes (parity.proto, VerdictBatch).
constexpr std::size_t kMaxVerdictBatch = 64;
constexpr std::size_t kMaxVerdictBatchBytes = std::size_t{1} << 20;

}  // namespace

StreamReactor::StreamReactor(StreamContext* context, std::string peer, uint64_t session)
    : context_(context), session_(context, this, std::move(peer), session) {
  if (ServerMetrics* m = context_->metrics()) m->AgentConnected();
}

void StreamReactor::Begin() {
  {
    absl::MutexLock lock(&mu_);
    read_ = Read::kReading;
  }
  StartRead(&in_);
}

void StreamReactor::Refuse(const grpc::Status& status) {
  refused_ = true;
  session_.EndReading();
  session_.Finish();
  Finish(status);
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the stream broke
    mu_.Lock();
    read_ = Read::kIdle;
    session_.EndReading();
    ActAndUnlock();
    return;
  }
  if (ServerMetrics* m = context_->metrics()) m->MessageBytes(in_.Length());
  mu_.Lock();
  read_ = Read::kIdle;
  if (reads_done()) {  // a worker found an earlier message invalid: the stream is ending
    in_.Clear();
    ActAndUnlock();
    return;
  }
  holds_ = 1;  // this reaction's hold on the next read
  mu_.Unlock();
  MessageBytes bytes = FromGrpc(std::move(in_));  // the slices, not copied
  const absl::Status s = session_.OnMessage(bytes);
  mu_.Lock();
  if (!s.ok()) EndReading(s);  // a protocol violation ends this stream only
  ReleaseHold();
  ActAndUnlock();
}

void StreamReactor::OnWriteDone(bool ok) {
  mu_.Lock();
  outbox_.WriteDone(ok);  // not ok: the client is gone, nothing more is written
  ActAndUnlock();
}

void StreamReactor::OnDone() {
  {
    absl::MutexLock lock(&mu_);
    if (waiting_for_reader_) {
      if (ServerMetrics* m = context_->metrics()) m->StreamWaitingForReader(-1);
    }
  }
  session_.Close();  // gives back the bytes of blobs of no call, and the kept-blob offer
  context_->StreamEnded(session_.origin(), /*counted=*/!refused_);
  delete this;
}

void StreamReactor::Answer(MessageBytes message, bool batch_verdicts, std::string who) {
  absl::MutexLock lock(&mu_);
  who_ = std::move(who);
  outbox_.Push(std::move(AsGrpc(message)));
  // Verdicts ready together go in one message (VerdictBatch) to an agent that takes them.
  // While later calls are being checked, ready verdicts wait up to verdict_hold for company.
  if (batch_verdicts) {
    outbox_.BatchVerdicts(kMaxVerdictBatch, kMaxVerdictBatchBytes,
                          std::chrono::milliseconds(context_->options().verdict_hold_ms));
  }
}

void StreamReactor::Post(MessageBytes message) {
  mu_.Lock();
  if (session_.state() == StreamState::kFinished) {  // its end went out: nothing more does
    mu_.Unlock();
    return;
  }
  outbox_.Push(std::move(AsGrpc(message)));
  ActAndUnlock();
}

void StreamReactor::Queue(CallWork work) {
  uint64_t slot;
  {
    absl::MutexLock lock(&mu_);
    slot = outbox_.Reserve();
    ++holds_;  // released below if queued, else by Resume() when a worker admits the call
  }
  WorkItem item;
  item.bytes = work.bytes;
  item.run = [this, slot, work = std::move(work)]() mutable {
    Deliver(slot, session_.RunCall(std::move(work)));  // the call's memory is back before
  };
  if (context_->Enqueue(std::move(item), [this] { Resume(); })) {
    absl::MutexLock lock(&mu_);
    --holds_;  // cannot reach 0: the reaction handling the message still holds
  }
  // Else no more reads until a worker admits the call: back-pressure through flow control.
}

void StreamReactor::Resume() {
  mu_.Lock();
  ReleaseHold();
  ActAndUnlock();
}

void StreamReactor::Deliver(uint64_t slot, CallAnswer checked) {
  mu_.Lock();
  if (!checked.error.ok()) EndReading(checked.error);
  std::optional<grpc::ByteBuffer> verdict;
  if (checked.verdict) verdict = std::move(AsGrpc(*checked.verdict));
  outbox_.Complete(slot, std::move(verdict));
  ActAndUnlock();
}

void StreamReactor::ReleaseHold() {
  if (--holds_ == 0 && !reads_done() && read_ == Read::kIdle) read_ = Read::kWanted;
}

void StreamReactor::EndReading(const absl::Status& error) {
  if (error_.ok()) error_ = error;
  session_.EndReading();  // read nothing more; an outstanding read is discarded
}

void StreamReactor::OnAlarm() {
  mu_.Lock();
  alarm_state_ = Alarm::kNone;
  ActAndUnlock();
}

bool StreamReactor::StartReadLocked() {
  if (read_ != Read::kWanted || reads_done()) return false;
  // Memory per stream stays bounded whatever the client does: past the bound of verdicts not yet
  // written, read nothing more until the client reads (a write completes, and this runs again).
  const bool behind = outbox_.unsent_bytes() > context_->options().max_unsent_verdict_bytes;
  if (behind != waiting_for_reader_) {
    waiting_for_reader_ = behind;
    if (ServerMetrics* m = context_->metrics()) m->StreamWaitingForReader(behind ? 1 : -1);
  }
  if (behind) return false;
  read_ = Read::kReading;
  return true;
}

void StreamReactor::ActAndUnlock() {
  bool write = false, finish = false, more = false;
  const bool read = StartReadLocked();
  const OrderedOutbox::Clock::time_point now = OrderedOutbox::Clock::now();
  std::optional<OrderedOutbox::Clock::time_point> held_until;
  write = outbox_.StartWrite(now, &out_, &more, &held_until);
  grpc::Alarm* alarm = nullptr;   // set after mu_ is released (its callback takes mu_)
  grpc::Alarm* cancel = nullptr;  // likewise cancelled after
  if (held_until && alarm_state_ == Alarm::kNone) {
    // A new alarm each time: the last one's callback may still be returning. Nothing replaces
    // this one, and the stream cannot finish, until its callback has run.
    alarm_state_ = Alarm::kSet;
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm = alarm_.get();
  } else if (!held_until && alarm_state_ == Alarm::kSet && outbox_.drained()) {
    // Every call's verdict is out or going: nothing waits for the alarm any more, and the
    // stream must not wait out the hold to finish. Cancelling runs its callback at once.
    alarm_state_ = Alarm::kCancelled;
    cancel = alarm_.get();
  }
  if (!read && !write && !outbox_.writing() && read_ != Read::kReading &&
      session_.state() == StreamState::kDraining && outbox_.drained() && holds_ == 0 &&
      alarm_state_ == Alarm::kNone) {
    session_.Finish();
    finish = true;
  }
  const absl::Status status = error_;
  const std::string who = who_;
  mu_.Unlock();
  if (finish) {
    if (!status.ok()) {
      if (ServerMetrics* m = context_->metrics()) {
        m->StreamError(absl::StatusCodeToString(status.code()));
      }
      common::LogWarning(
          absl::StrCat("stream from ", session_.peer(), " (", who, ") ended: ", status.ToString()));
    }
    Finish(ToGrpcStatus(status));
    return;
  }
  // Both may be needed: a read and a write can be outstanding at once. The stream cannot
  // finish while either is, so the reactor outlives both calls. More verdicts waiting: gRPC may
  // hold this one and send them together.
  if (alarm != nullptr) {
    alarm->Set(std::chrono::system_clock::now() + (*held_until - now), [this](bool) { OnAlarm(); });
  }
  if (cancel != nullptr) cancel->Cancel();
  if (write) {
    if (ServerMetrics* m = context_->metrics()) m->MessageSent();
    StartWrite(&out_, common::WriteOptionsFor(more));
  }
  if (read) StartRead(&in_);
}

}  // namespace parity::server
