#include "server/service/stream_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/base/text.h"
#include "common/transport/wire.h"
#include "server/metrics/metrics.h"
#include "server/service/agent_messages.h"
#include "server/service/blob_assembler.h"

namespace parity::server {
namespace {

// A VerdictBatch holds at most this many verdicts and bytes (parity.proto, VerdictBatch).
constexpr std::size_t kMaxVerdictBatch = 64;
constexpr std::size_t kMaxVerdictBatchBytes = std::size_t{1} << 20;

// The proto's name of each kind of AgentMessage, for the protocol errors.
absl::string_view MessageName(v1::AgentMessage::KindCase kind) {
  switch (kind) {
    case v1::AgentMessage::kHello:
      return "Hello";
    case v1::AgentMessage::kCall:
      return "ApiCall";
    case v1::AgentMessage::kChunk:
      return "TensorChunk";
    case v1::AgentMessage::kStats:
      return "AgentStats";
    case v1::AgentMessage::kGoodbye:
      return "Goodbye";
    case v1::AgentMessage::kRelease:
      return "BlobRelease";
    case v1::AgentMessage::kBatch:
      return "MessageBatch";
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  return "an empty AgentMessage";
}

absl::Status NeedHello(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("protocol error: ", what, " before Hello; the first message must be Hello"));
}

}  // namespace

void CheckService::FailBlobGrowthAboveForTesting(uint64_t bytes) {
  BlobAssembler::FailGrowthAboveForTesting(bytes);
}

CheckService::Reactor::Reactor(CheckService* service, std::string peer, uint64_t session)
    : service_(service),
      peer_(std::move(peer)),
      session_(session),
      blobs_(service->options_.parity().limits, &service->partial_blobs_, &service->kept_offered_) {
  if (service_->metrics_) service_->metrics_->AgentConnected();
}

void CheckService::Reactor::Begin() {
  {
    absl::MutexLock lock(&mu_);
    read_ = Read::kReading;
  }
  StartRead(&in_);
}

void CheckService::Reactor::Refuse(const grpc::Status& status) {
  refused_ = true;
  Finish(status);
}

void CheckService::Reactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the stream broke
    mu_.Lock();
    read_ = Read::kIdle;
    reads_done_ = true;
    ActAndUnlock();
    return;
  }
  if (service_->metrics_) service_->metrics_->MessageBytes(in_.Length());
  mu_.Lock();
  read_ = Read::kIdle;
  if (reads_done_) {  // a worker found an earlier message invalid: the stream is ending
    in_.Clear();
    ActAndUnlock();
    return;
  }
  holds_ = 1;  // this reaction's hold on the next read
  mu_.Unlock();
  const std::size_t bytes = in_.Length();
  absl::Status s;
  try {
    s = Handle();
  } catch (const std::bad_alloc&) {
    // Out of memory for this message: this stream ends with a status, the server goes on.
    s = absl::ResourceExhaustedError(absl::StrCat("out of memory while receiving message ",
                                                  messages_ + 1, " on this stream (", bytes,
                                                  " bytes); the stream ends"));
  } catch (const std::exception& e) {
    s = absl::InternalError(
        absl::StrCat("while receiving message ", messages_ + 1, ": ", e.what()));
  }
  ++messages_;
  mu_.Lock();
  if (!s.ok()) EndReading(s);  // a protocol violation ends this stream only
  ReleaseHold();
  ActAndUnlock();
}

void CheckService::Reactor::OnWriteDone(bool ok) {
  mu_.Lock();
  outbox_.WriteDone(ok);  // not ok: the client is gone, nothing more is written
  ActAndUnlock();
}

void CheckService::Reactor::OnDone() {
  if (hello_ && service_->options_.on_stream_end) service_->options_.on_stream_end(origin_);
  blobs_.Close();  // gives back the bytes of blobs of no call, and the kept-blob offer
  if (service_->metrics_) service_->metrics_->AgentDisconnected();
  if (!refused_) service_->active_.fetch_sub(1);
  delete this;
}

void CheckService::Reactor::ReleaseHold() {
  if (--holds_ == 0 && !reads_done_ && read_ == Read::kIdle) read_ = Read::kWanted;
}

void CheckService::Reactor::EndReading(const absl::Status& error) {
  if (error_.ok()) error_ = error;
  reads_done_ = true;  // read nothing more; an outstanding read is discarded
}

void CheckService::Reactor::OnAlarm() {
  mu_.Lock();
  alarm_state_ = Alarm::kNone;
  ActAndUnlock();
}

void CheckService::Reactor::ActAndUnlock() {
  bool read = false, write = false, finish = false, more = false;
  if (read_ == Read::kWanted && !reads_done_) {
    read = true;
    read_ = Read::kReading;
  }
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
  if (!read && !write && !outbox_.writing() && read_ != Read::kReading && reads_done_ &&
      outbox_.drained() && holds_ == 0 && alarm_state_ == Alarm::kNone && !finished_) {
    finished_ = true;
    finish = true;
  }
  const absl::Status status = error_;
  const std::string who = who_;
  mu_.Unlock();
  if (finish) {
    if (!status.ok()) {
      if (service_->metrics_) {
        service_->metrics_->StreamError(absl::StatusCodeToString(status.code()));
      }
      common::LogWarning(
          absl::StrCat("stream from ", peer_, " (", who, ") ended: ", status.ToString()));
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
    if (service_->metrics_) service_->metrics_->MessageSent();
    StartWrite(&out_, common::WriteOptionsFor(more));
  }
  if (read) StartRead(&in_);
}

// An ApiCall goes to a worker unparsed (the worker parses it: the tensors are copied there, not
// on this thread); any other message is small and parsed here.
absl::Status CheckService::Reactor::Handle() { return HandleMessage(in_, /*in_batch=*/false); }

absl::Status CheckService::Reactor::HandleMessage(grpc::ByteBuffer& in, bool in_batch) {
  const Peek peek = PeekMessage(in);
  if (peek.kind == v1::AgentMessage::kCall) {
    if (!hello_) return NeedHello("ApiCall");
    if (service_->metrics_) service_->metrics_->CallReceived(peek.phase);
    // A malformed call has no sequence to check: its worker reports the bytes as malformed.
    return OnCall(peek.well_formed ? std::optional<uint64_t>(peek.sequence) : std::nullopt,
                  std::make_shared<grpc::ByteBuffer>(std::move(in)), nullptr,
                  peek.well_formed ? peek.kept_blob_ids : std::vector<uint64_t>{});
  }
  if (peek.kind == v1::AgentMessage::kBatch) {
    if (in_batch) return absl::InvalidArgumentError("a MessageBatch inside a MessageBatch");
    if (!hello_) return NeedHello("MessageBatch");
    return HandleBatch(in);
  }
  v1::AgentMessage m;
  const bool parsed = common::Parse(in, &m);
  const std::size_t bytes = in.Length();
  in.Clear();
  if (!parsed) return NotAMessage(messages_, bytes);
  return HandleParsed(m, in_batch);
}

absl::Status CheckService::Reactor::HandleParsed(v1::AgentMessage& m, bool in_batch) {
  // One row a kind: its handler, whether a MessageBatch may carry it, whether the stream's Hello
  // must come first.
  struct Route {
    v1::AgentMessage::KindCase kind;
    bool in_batch;
    bool needs_hello;
    absl::Status (Reactor::*handle)(v1::AgentMessage& m);
  };
  static constexpr Route kRoutes[] = {
      {v1::AgentMessage::kHello, false, false, &Reactor::RouteHello},
      {v1::AgentMessage::kCall, true, true, &Reactor::RouteCall},
      {v1::AgentMessage::kChunk, true, true, &Reactor::RouteChunk},
      {v1::AgentMessage::kStats, false, true, &Reactor::RouteStats},
      {v1::AgentMessage::kGoodbye, false, true, &Reactor::RouteGoodbye},
      {v1::AgentMessage::kRelease, true, true, &Reactor::RouteRelease},
  };
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (r.kind == m.kind_case()) route = &r;
  }
  if (in_batch && (route == nullptr || !route->in_batch)) {
    return absl::InvalidArgumentError(
        "only ApiCall, TensorChunk and BlobRelease may be items of a MessageBatch");
  }
  if (route == nullptr) {
    return absl::InvalidArgumentError(
        "empty AgentMessage: none of hello, call, chunk, stats, goodbye, release, batch is set "
        "(is the agent newer than this server?)");
  }
  if (route->needs_hello && !hello_) return NeedHello(MessageName(m.kind_case()));
  return (this->*route->handle)(m);
}

absl::Status CheckService::Reactor::RouteHello(v1::AgentMessage& m) { return OnHello(m.hello()); }

absl::Status CheckService::Reactor::RouteCall(v1::AgentMessage& m) {
  auto call = std::make_shared<v1::ApiCall>();
  call->Swap(m.mutable_call());
  if (service_->metrics_) service_->metrics_->CallReceived(call->phase());
  const uint64_t sequence = call->sequence();
  std::vector<uint64_t> listed(call->kept_blob_ids().begin(), call->kept_blob_ids().end());
  return OnCall(sequence, nullptr, std::move(call), std::move(listed));
}

absl::Status CheckService::Reactor::RouteChunk(v1::AgentMessage& m) {
  return blobs_.OnChunk(m.chunk());
}

absl::Status CheckService::Reactor::RouteStats(v1::AgentMessage& m) {
  OnStats(m.stats());
  return absl::OkStatus();
}

absl::Status CheckService::Reactor::RouteGoodbye(v1::AgentMessage& m) {
  OnStats(m.goodbye().final_stats());
  return absl::OkStatus();
}

absl::Status CheckService::Reactor::RouteRelease(v1::AgentMessage& m) {
  return blobs_.OnRelease(m.release());
}

absl::Status CheckService::Reactor::HandleBatch(grpc::ByteBuffer& in) {
  // Each item is a view of this message's bytes: a call still goes to its worker unparsed.
  absl::StatusOr<std::vector<grpc::ByteBuffer>> items = SplitBatch(in);
  in.Clear();
  if (!items.ok()) {
    return absl::Status(
        items.status().code(),
        absl::StrCat("message ", messages_ + 1, " on this stream: ", items.status().message()));
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    const absl::Status s = HandleMessage((*items)[i], /*in_batch=*/true);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("MessageBatch item ", i + 1, " of ", items->size(),
                                                 ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckService::Reactor::OnHello(const v1::Hello& hello) {
  if (hello_) return absl::FailedPreconditionError("protocol error: a second Hello");
  if (hello.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unsupported protocol version ", hello.protocol_version(), ": this server speaks ",
        kProtocolVersion, "; use an agent and server of the same release"));
  }
  PARITY_RETURN_IF_ERROR(ValidateHello(hello));
  const auto& ranks = service_->options_.config.rank_list;
  if (!ranks.empty() && std::find(ranks.begin(), ranks.end(), hello.rank()) == ranks.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "rank ", hello.rank(), " is not in this server's rank_list; another server checks it"));
  }
  hello_ = true;
  service_->NoteConfigDigest(hello.run_id(), hello.rank(), hello.config_digest());
  origin_.rank = hello.rank();
  origin_.run_id = hello.run_id();
  origin_.hostname = hello.hostname();
  origin_.framework = hello.framework_version();
  agent_ =
      absl::StrCat(hello.run_id(), "\n", hello.hostname(), "\n", hello.pid(), "\n", hello.rank());
  common::LogInfo(
      absl::StrCat("agent connected: rank ", hello.rank(), " of ", hello.world_size(), ", host ",
                   common::Printable(hello.hostname()), ", pid ", hello.pid(), ", ",
                   hello.framework_version().empty() ? std::string("framework not said")
                                                     : common::Printable(hello.framework_version()),
                   ", run ", common::Printable(hello.run_id()), ", from ", peer_));
  v1::ServerMessage reply;
  *reply.mutable_server_info() = service_->options_.server_info;
  reply.mutable_server_info()->set_kept_blob_bytes(
      blobs_.OfferKept(service_->options_.server_info.kept_blob_bytes()));
  reply.mutable_server_info()->set_accepts_batches(true);
  reply.mutable_server_info()->set_protocol_version(kProtocolVersion);
  reply.mutable_server_info()->set_session_id(absl::StrCat(session_));
  grpc::ByteBuffer bytes = common::Serialize(reply);
  absl::MutexLock lock(&mu_);
  who_ = absl::StrCat("rank ", hello.rank());
  outbox_.Push(std::move(bytes));
  // Verdicts ready together go in one message (VerdictBatch) to an agent that takes them.
  // While later calls are being checked, ready verdicts wait up to verdict_hold for company.
  if (hello.accepts_batches()) {
    outbox_.BatchVerdicts(kMaxVerdictBatch, kMaxVerdictBatchBytes,
                          std::chrono::milliseconds(service_->options_.parity().verdict_hold_ms));
  }
  return absl::OkStatus();
}

void CheckService::Reactor::OnStats(const v1::AgentStats& stats) {
  ServerMetrics* m = service_->metrics_;
  if (m == nullptr) return;
  // Agent counters are cumulative since the agent started, over all its streams: the server
  // counts each increase once per agent, whichever of its streams reports it.
  const v1::AgentStats last = service_->ExchangeAgentStats(agent_, stats);
  if (stats.captured_calls() > last.captured_calls()) {
    m->AgentCaptured(stats.captured_calls() - last.captured_calls());
  }
  for (const auto& [reason, n] : stats.dropped_calls()) {
    auto it = last.dropped_calls().find(reason);
    const uint64_t before = it == last.dropped_calls().end() ? 0 : it->second;
    if (n > before) m->AgentDropped(reason, n - before);
  }
  if (stats.lost_in_flight_calls() > last.lost_in_flight_calls()) {
    m->AgentDropped("lost_in_flight", stats.lost_in_flight_calls() - last.lost_in_flight_calls());
  }
}

absl::Status CheckService::Reactor::AdmitSequence(std::optional<uint64_t> sequence) {
  if (!sequence) return absl::OkStatus();
  if (*sequence == 0 || *sequence <= last_sequence_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApiCall.sequence ", *sequence, " after ", last_sequence_,
                     " on this stream: sequence numbers must increase from one call to the next, "
                     "starting above 0"));
  }
  last_sequence_ = *sequence;
  return absl::OkStatus();
}

absl::Status CheckService::Reactor::OnCall(std::optional<uint64_t> sequence,
                                           std::shared_ptr<grpc::ByteBuffer> raw,
                                           std::shared_ptr<v1::ApiCall> call,
                                           std::vector<uint64_t> kept_blob_ids) {
  PARITY_RETURN_IF_ERROR(AdmitSequence(sequence));
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<BlobStore> blobs,
                          blobs_.TakeForCall(sequence.value_or(0), kept_blob_ids));
  const uint64_t bytes = blobs->bytes() + (raw ? raw->Length() : call->ByteSizeLong());
  uint64_t slot;
  {
    absl::MutexLock lock(&mu_);
    slot = outbox_.Reserve();
    ++holds_;  // released below if queued, else by Resume() when a worker admits the call
  }
  WorkItem item;
  item.bytes = bytes;
  item.run = [this, slot, message = messages_, raw, call, blobs] {
    Run(slot, message, raw, call, blobs);
  };
  if (service_->queue_->PushOrPark(std::move(item), [this] { Resume(); })) {
    absl::MutexLock lock(&mu_);
    --holds_;  // cannot reach 0: this reaction still holds
  }
  // Else no more reads until a worker admits the call: back-pressure through flow control.
  return absl::OkStatus();
}

// On a worker: parse (when the reactor did not), check, deliver. Never throws.
void CheckService::Reactor::Run(uint64_t slot, uint64_t message,
                                std::shared_ptr<grpc::ByteBuffer> raw,
                                std::shared_ptr<v1::ApiCall> call,
                                std::shared_ptr<BlobStore> blobs) {
  std::optional<grpc::ByteBuffer> verdict;
  absl::Status error;
  try {
    if (raw) {
      v1::AgentMessage m;
      const double parse_start = common::ThreadCpuSeconds();
      const bool parsed = common::Parse(*raw, &m);
      if (service_->metrics_) {
        service_->metrics_->StageCpu(ServerMetrics::Stage::kParse,
                                     common::ThreadCpuSeconds() - parse_start);
      }
      if (!parsed) {
        Deliver(slot, std::nullopt, NotAMessage(message, raw->Length()));
        return;
      }
      raw.reset();  // the bytes, now copied into the message
      call = std::make_shared<v1::ApiCall>();
      call->Swap(m.mutable_call());
    }
    v1::ServerMessage msg;
    const ServerCall server_call(*call, origin_.framework);  // names and traits, made once
    *msg.mutable_verdict() = service_->handler_(origin_, server_call, *blobs);
    verdict = common::Serialize(msg);
  } catch (const std::bad_alloc&) {
    error = absl::ResourceExhaustedError(
        absl::StrCat("out of memory while checking message ", message + 1, "; the stream ends"));
  } catch (const std::exception& e) {
    error =
        absl::InternalError(absl::StrCat("while checking message ", message + 1, ": ", e.what()));
  }
  raw.reset();
  blobs.reset();  // memory back before the verdict goes out
  Deliver(slot, std::move(verdict), error);
}

void CheckService::Reactor::Resume() {
  mu_.Lock();
  ReleaseHold();
  ActAndUnlock();
}

void CheckService::Reactor::Deliver(uint64_t slot, std::optional<grpc::ByteBuffer> verdict,
                                    const absl::Status& error) {
  mu_.Lock();
  if (!error.ok()) EndReading(error);
  outbox_.Complete(slot, std::move(verdict));
  ActAndUnlock();
}

}  // namespace parity::server
