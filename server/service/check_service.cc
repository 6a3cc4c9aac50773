#include "server/service/check_service.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "common/wire.h"
#include "server/metrics.h"

namespace parity::server {

uint64_t BlobStore::bytes() const {
  uint64_t n = 0;
  for (const auto& [id, b] : blobs_) n += b.size();
  return n;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  constexpr std::size_t kMax = 1024;
  if (message.size() > kMax) message = message.substr(0, kMax - 3) + "...";
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

namespace {

// What the reactor needs of a serialized AgentMessage without parsing it: its kind, from the
// first tag of a message that holds exactly one length-delimited field spanning all its bytes
// (what every protobuf serializer writes for a oneof; else kind 0, and the message is parsed
// whole), and for an ApiCall its phase (the tensors are skipped over, not copied).
struct Peek {
  int kind = 0;
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  uint64_t sequence = 0;
  bool well_formed = false;  // every field of the ApiCall was read or skipped cleanly
};

Peek PeekMessage(grpc::ByteBuffer& buffer) {
  using google::protobuf::internal::WireFormatLite;
  grpc::ProtoBufferReader reader(&buffer);
  google::protobuf::io::CodedInputStream in(&reader);
  const uint32_t tag = in.ReadTag();
  uint32_t length = 0;
  if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
      !in.ReadVarint32(&length) ||
      static_cast<uint64_t>(in.CurrentPosition()) + length != buffer.Length()) {
    return {};
  }
  Peek peek;
  peek.kind = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
  if (peek.kind != v1::AgentMessage::kCall) return peek;
  for (uint32_t t = in.ReadTag(); t != 0; t = in.ReadTag()) {
    if (t ==
        WireFormatLite::MakeTag(v1::ApiCall::kPhaseFieldNumber, WireFormatLite::WIRETYPE_VARINT)) {
      uint32_t phase = 0;
      if (!in.ReadVarint32(&phase)) break;
      if (v1::Phase_IsValid(static_cast<int>(phase))) peek.phase = static_cast<v1::Phase>(phase);
    } else if (t == WireFormatLite::MakeTag(v1::ApiCall::kSequenceFieldNumber,
                                            WireFormatLite::WIRETYPE_VARINT)) {
      if (!in.ReadVarint64(&peek.sequence)) break;
    } else if (!WireFormatLite::SkipField(&in, t)) {
      return peek;  // malformed: the worker's parse says so
    }
  }
  peek.well_formed = in.ConsumedEntireMessage();
  return peek;
}

absl::Status NotAMessage(uint64_t index, std::size_t bytes) {
  return absl::InvalidArgumentError(absl::StrCat(
      "message ", index + 1, " on this stream (", bytes,
      " bytes) is not a valid parity.v1.AgentMessage: is the client an agent of a different "
      "release, or something other than a Parity agent?"));
}

std::atomic<uint64_t> g_fail_blob_growth_above{0};

// Appends a chunk's bytes to its blob: the blob grows as bytes arrive (never to the announced
// total at once, so an announcement costs nothing until the bytes are there).
void AppendToBlob(std::string& blob, absl::string_view bytes) {
  const uint64_t limit = g_fail_blob_growth_above.load(std::memory_order_relaxed);
  if (limit != 0 && blob.size() + bytes.size() > limit) throw std::bad_alloc();
  blob.append(bytes.data(), bytes.size());
}

absl::Status HelloStringTooLong(absl::string_view field, std::size_t bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat("Hello.", field, ": ", bytes, " bytes, at most ", kMaxHelloStringBytes));
}

// The rules a Hello must follow beyond its protocol version.
absl::Status ValidateHello(const v1::Hello& h) {
  if (h.world_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello.world_size: must be at least 1, got ", h.world_size()));
  }
  if (h.rank() < 0 || h.rank() >= h.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("Hello.rank: ", h.rank(), " is not in 0..",
                                                   h.world_size() - 1, " (world_size ",
                                                   h.world_size(), ")"));
  }
  if (h.local_rank() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello.local_rank: must not be negative, got ", h.local_rank()));
  }
  const std::pair<absl::string_view, const std::string*> strings[] = {
      {"run_id", &h.run_id()},
      {"hostname", &h.hostname()},
      {"agent_version", &h.agent_version()},
      {"framework_version", &h.framework_version()},
      {"device_type", &h.device_type()},
      {"config_digest", &h.config_digest()},
  };
  for (const auto& [name, value] : strings) {
    if (value->size() > kMaxHelloStringBytes) return HelloStringTooLong(name, value->size());
  }
  return absl::OkStatus();
}

}  // namespace

void CheckService::FailBlobGrowthAboveForTesting(uint64_t bytes) {
  g_fail_blob_growth_above.store(bytes);
}

// One agent stream. Every member shared between reactions (gRPC threads) and workers is guarded
// by mu_. The reactor deletes itself in OnDone, which gRPC calls only after Finish(); Finish is
// called only when no read, write or queued call is outstanding, and always as the last action
// of the thread that calls it, so nothing touches the reactor after it.
class CheckService::Reactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Reactor(CheckService* service, std::string peer, uint64_t session)
      : service_(service), peer_(std::move(peer)), session_(session) {
    if (service_->metrics_) service_->metrics_->AgentConnected();
  }

  void Begin() {
    reading_ = true;
    StartRead(&in_);
  }

  void Refuse(const grpc::Status& status) {
    refused_ = true;
    Finish(status);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::unique_lock<std::mutex> lock(mu_);
      reading_ = false;
      reads_done_ = true;
      Act(lock);
      return;
    }
    if (service_->metrics_) service_->metrics_->MessageBytes(in_.Length());
    {
      std::unique_lock<std::mutex> lock(mu_);
      reading_ = false;
      if (reads_done_) {  // a worker found an earlier message invalid: the stream is ending
        in_.Clear();
        Act(lock);
        return;
      }
      holds_ = 1;  // this reaction's hold on the next read
    }
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
    std::unique_lock<std::mutex> lock(mu_);
    if (!s.ok()) {
      // A protocol violation ends this stream only; calls already queued still get verdicts.
      error_ = s;
      reads_done_ = true;
    }
    ReleaseHold();
    Act(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      write_failed_ = true;  // the client is gone; drop what is left to send
      outbox_.clear();
    } else if (!outbox_.empty()) {
      outbox_.pop_front();
    }
    Act(lock);
  }

  void OnCancel() override {}

  void OnDone() override {
    service_->partial_blob_bytes_.fetch_sub(pending_blob_bytes_);  // blobs of no call
    if (service_->metrics_) service_->metrics_->AgentDisconnected();
    if (!refused_) service_->active_.fetch_sub(1);
    delete this;
  }

 private:
  // The next read starts when every hold is released: the reaction handling the last message,
  // and a call parked in the full work queue (released when a worker admits it).
  void ReleaseHold() {
    if (--holds_ == 0 && !reads_done_) read_again_ = true;
  }

  // Decides the next action under the lock, then performs it with the lock released, as the
  // last thing this thread does with the reactor.
  void Act(std::unique_lock<std::mutex>& lock) {
    bool read = false, write = false, finish = false, more = false;
    if (read_again_ && !reads_done_) {
      read_again_ = false;
      read = true;
      reading_ = true;
    }
    if (!writing_ && !outbox_.empty() && !write_failed_) {
      writing_ = true;
      out_ = std::move(outbox_.front());
      write = true;
      more = outbox_.size() > 1;
    }
    if (!read && !write && !writing_ && !reading_ && reads_done_ && in_flight_ == 0 && !finished_ &&
        holds_ == 0) {
      finished_ = true;
      finish = true;
    }
    const absl::Status status = error_;
    const std::string who = who_;
    lock.unlock();
    if (finish) {
      if (!status.ok() && service_->metrics_) {
        service_->metrics_->StreamError(absl::StatusCodeToString(status.code()));
      }
      if (!status.ok()) {
        common::LogWarning(
            absl::StrCat("stream from ", peer_, " (", who, ") ended: ", status.ToString()));
      }
      Finish(ToGrpcStatus(status));
      return;
    }
    // Both may be needed: a read and a write can be outstanding at once. The stream cannot
    // finish while either is, so the reactor outlives both calls.
    // More verdicts waiting: gRPC may hold this one and send them together.
    if (write) StartWrite(&out_, common::WriteOptionsFor(more));
    if (read) StartRead(&in_);
  }

  // An ApiCall goes to a worker unparsed (the worker parses it: the tensors are copied there,
  // not on this thread); any other message is small and parsed here.
  absl::Status Handle() {
    const Peek peek = PeekMessage(in_);
    if (peek.kind == v1::AgentMessage::kCall) {
      if (!hello_) return NeedHello("ApiCall");
      if (service_->metrics_) service_->metrics_->CallReceived(peek.phase);
      // A malformed call has no sequence to check: its worker reports the bytes as malformed.
      return OnCall(peek.well_formed ? std::optional<uint64_t>(peek.sequence) : std::nullopt,
                    std::make_shared<grpc::ByteBuffer>(std::move(in_)), nullptr);
    }
    v1::AgentMessage m;
    const bool parsed = common::Parse(in_, &m);
    const std::size_t bytes = in_.Length();
    in_.Clear();
    if (!parsed) return NotAMessage(messages_, bytes);
    switch (m.kind_case()) {
      case v1::AgentMessage::kHello:
        return OnHello(m.hello());
      case v1::AgentMessage::kCall: {
        if (!hello_) return NeedHello("ApiCall");
        auto call = std::make_shared<v1::ApiCall>();
        call->Swap(m.mutable_call());
        if (service_->metrics_) service_->metrics_->CallReceived(call->phase());
        const uint64_t sequence = call->sequence();
        return OnCall(sequence, nullptr, std::move(call));
      }
      case v1::AgentMessage::kChunk:
        if (!hello_) return NeedHello("TensorChunk");
        return OnChunk(m.chunk());
      case v1::AgentMessage::kStats:
        if (!hello_) return NeedHello("AgentStats");
        OnStats(m.stats());
        return absl::OkStatus();
      case v1::AgentMessage::kGoodbye:
        if (!hello_) return NeedHello("Goodbye");
        OnStats(m.goodbye().final_stats());
        return absl::OkStatus();
      default:
        return absl::InvalidArgumentError(
            "empty AgentMessage: none of hello, call, chunk, stats, goodbye is set (is the "
            "agent newer than this server?)");
    }
  }

  static absl::Status NeedHello(absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol error: ", what, " before Hello; the first message must be Hello"));
  }

  absl::Status OnHello(const v1::Hello& hello) {
    if (hello_) return absl::FailedPreconditionError("protocol error: a second Hello");
    if (hello.protocol_version() != kProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "unsupported protocol version ", hello.protocol_version(), ": this server speaks ",
          kProtocolVersion, "; use an agent and server of the same release"));
    }
    PARITY_RETURN_IF_ERROR(ValidateHello(hello));
    const auto& ranks = service_->options_.rank_list;
    if (!ranks.empty() && ranks.count(hello.rank()) == 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "rank ", hello.rank(), " is not in this server's rank_list; another server checks it"));
    }
    hello_ = true;
    origin_.rank = hello.rank();
    origin_.run_id = hello.run_id();
    origin_.hostname = hello.hostname();
    common::LogInfo(absl::StrCat("agent connected: rank ", hello.rank(), " of ", hello.world_size(),
                                 ", host ", common::Printable(hello.hostname()), ", pid ",
                                 hello.pid(), ", run ", common::Printable(hello.run_id()),
                                 ", from ", peer_));
    v1::ServerMessage reply;
    *reply.mutable_server_info() = service_->options_.server_info;
    reply.mutable_server_info()->set_protocol_version(kProtocolVersion);
    reply.mutable_server_info()->set_session_id(absl::StrCat(session_));
    std::lock_guard<std::mutex> lock(mu_);
    who_ = absl::StrCat("rank ", hello.rank());
    outbox_.push_back(common::Serialize(reply));
    return absl::OkStatus();
  }

  absl::Status OnChunk(const v1::TensorChunk& chunk) {
    const auto& limits = service_->options_.limits;
    if (chunk.total_bytes() > limits.max_tensor_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensor ", chunk.blob_id(), ": total_bytes ", chunk.total_bytes(),
                       " exceeds max_tensor_bytes ", limits.max_tensor_bytes));
    }
    const auto [total, first] = blob_totals_.emplace(chunk.blob_id(), chunk.total_bytes());
    if (!first && total->second != chunk.total_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunked tensor ", chunk.blob_id(), ": total_bytes ", chunk.total_bytes(),
          " in this chunk, ", total->second, " in its first (it must be the same in every chunk)"));
    }
    std::string& blob = blobs_->blobs()[chunk.blob_id()];
    if (chunk.offset() != blob.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunked tensor ", chunk.blob_id(), ": chunk at offset ", chunk.offset(),
                       ", expected ", blob.size(), " (chunks must arrive in order)"));
    }
    if (chunk.offset() + chunk.data().size() > chunk.total_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunked tensor ", chunk.blob_id(), ": chunk ends at ",
          chunk.offset() + chunk.data().size(), ", past total_bytes ", chunk.total_bytes()));
    }
    const uint64_t n = chunk.data().size();
    if (pending_blob_bytes_ + n > limits.max_call_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensors awaiting their call: ", pending_blob_bytes_ + n,
                       " bytes exceed max_call_bytes ", limits.max_call_bytes));
    }
    const uint64_t cap = service_->options_.max_partial_blob_bytes;
    const uint64_t all = service_->partial_blob_bytes_.fetch_add(n) + n;
    if (all > cap) {
      service_->partial_blob_bytes_.fetch_sub(n);
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensors awaiting their calls on all streams would hold ", all,
                       " bytes, over parity.max_partial_blob_bytes ", cap, "; this stream ends"));
    }
    pending_blob_bytes_ += n;  // counted in the server-wide total until the call arrives
    AppendToBlob(blob, chunk.data());
    return absl::OkStatus();
  }

  void OnStats(const v1::AgentStats& stats) {
    ServerMetrics* m = service_->metrics_;
    if (m == nullptr) return;
    // Agent counters are cumulative per stream; the server counts increases.
    if (stats.captured_calls() > last_stats_.captured_calls()) {
      m->AgentCaptured(stats.captured_calls() - last_stats_.captured_calls());
    }
    for (const auto& [reason, n] : stats.dropped_calls()) {
      auto it = last_stats_.dropped_calls().find(reason);
      const uint64_t before = it == last_stats_.dropped_calls().end() ? 0 : it->second;
      if (n > before) m->AgentDropped(reason, n - before);
    }
    if (stats.lost_in_flight_calls() > last_stats_.lost_in_flight_calls()) {
      m->AgentDropped("lost_in_flight",
                      stats.lost_in_flight_calls() - last_stats_.lost_in_flight_calls());
    }
    last_stats_ = stats;
  }

  // One call: `raw` (parsed by the worker) or `call` (already parsed).
  absl::Status OnCall(std::optional<uint64_t> sequence, std::shared_ptr<grpc::ByteBuffer> raw,
                      std::shared_ptr<v1::ApiCall> call) {
    if (sequence) {
      if (*sequence == 0 || *sequence <= last_sequence_) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ApiCall.sequence ", *sequence, " after ", last_sequence_,
            " on this stream: sequence numbers must increase from one call to the next, "
            "starting above 0"));
      }
      last_sequence_ = *sequence;
    }
    // Chunks sent since the previous call belong to this one, and must all be complete.
    for (const auto& [id, total] : blob_totals_) {
      const std::string* blob = blobs_->FindBlob(id);
      const uint64_t have = blob == nullptr ? 0 : blob->size();
      if (have != total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chunked tensor ", id, ": ", have, " of its ", total, " bytes arrived before call ",
            sequence.value_or(0), " (every chunk of a tensor comes before the call that uses it)"));
      }
    }
    std::shared_ptr<BlobStore> blobs = std::move(blobs_);
    blobs_ = std::make_shared<BlobStore>();
    blob_totals_.clear();
    service_->partial_blob_bytes_.fetch_sub(pending_blob_bytes_);  // now the work queue's bytes
    pending_blob_bytes_ = 0;
    const uint64_t bytes = blobs->bytes() + (raw ? raw->Length() : call->ByteSizeLong());
    uint64_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = next_index_++;
      ++in_flight_;
      ++holds_;  // released below if queued, else by Resume() when a worker admits the call
    }
    WorkItem item;
    item.bytes = bytes;
    item.run = [this, index, message = messages_, raw, call, blobs]() mutable {
      std::optional<grpc::ByteBuffer> verdict;
      absl::Status error;
      try {
        if (raw) {
          v1::AgentMessage m;
          if (!common::Parse(*raw, &m)) {
            Deliver(index, std::nullopt, NotAMessage(message, raw->Length()));
            return;
          }
          raw.reset();  // the bytes, now copied into the message
          call = std::make_shared<v1::ApiCall>();
          call->Swap(m.mutable_call());
        }
        v1::ServerMessage msg;
        *msg.mutable_verdict() = service_->handler_(origin_, *call, *blobs);
        verdict = common::Serialize(msg);
      } catch (const std::bad_alloc&) {
        error = absl::ResourceExhaustedError(absl::StrCat("out of memory while checking message ",
                                                          message + 1, "; the stream ends"));
      } catch (const std::exception& e) {
        error = absl::InternalError(
            absl::StrCat("while checking message ", message + 1, ": ", e.what()));
      }
      raw.reset();
      blobs.reset();  // memory back before the verdict goes out
      Deliver(index, std::move(verdict), error);
    };
    const bool queued = service_->queue_->PushOrPark(std::move(item), [this] { Resume(); });
    if (queued) {
      std::lock_guard<std::mutex> lock(mu_);
      --holds_;  // cannot reach 0: OnReadDone still holds
    }
    // Else no more reads until a worker admits the call: back-pressure through flow control.
    return absl::OkStatus();
  }

  // A worker admitted the parked call: read on.
  void Resume() {
    std::unique_lock<std::mutex> lock(mu_);
    ReleaseHold();
    Act(lock);
  }

  // Call `index` is done: its verdict, or none when its message did not parse: `error` then ends
  // the stream after the verdicts of the calls before it (later calls, read meanwhile, get none,
  // as if the stream had stopped at the bad message). Verdicts go in arrival order.
  void Deliver(uint64_t index, std::optional<grpc::ByteBuffer> msg, const absl::Status& error) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!error.ok()) {
      if (error_.ok()) error_ = error;
      reads_done_ = true;  // read nothing more; an outstanding read is discarded
    }
    ready_.emplace(index, std::move(msg));
    for (auto it = ready_.find(next_to_send_); it != ready_.end();
         it = ready_.find(next_to_send_)) {
      if (!it->second) bad_message_sent_ = true;
      if (!write_failed_ && !bad_message_sent_) outbox_.push_back(std::move(*it->second));
      ready_.erase(it);
      ++next_to_send_;
    }
    --in_flight_;
    Act(lock);
  }

  CheckService* const service_;
  const std::string peer_;
  const uint64_t session_;
  bool refused_ = false;

  // Touched only by reactions, which gRPC serialises for reads (one read at a time).
  grpc::ByteBuffer in_;
  uint64_t messages_ = 0;  // messages read before in_
  bool hello_ = false;
  CallOrigin origin_;  // written at Hello, read by workers after (the queue orders the accesses)
  std::shared_ptr<BlobStore> blobs_ = std::make_shared<BlobStore>();
  std::map<uint64_t, uint64_t> blob_totals_;  // total_bytes of each blob of the coming call
  uint64_t pending_blob_bytes_ = 0;           // bytes in blobs_, also in the service's total
  uint64_t last_sequence_ = 0;
  v1::AgentStats last_stats_;

  std::mutex mu_;
  grpc::ByteBuffer out_;                 // the message being written
  std::deque<grpc::ByteBuffer> outbox_;  // front is out_ while writing_
  std::map<uint64_t, std::optional<grpc::ByteBuffer>> ready_;
  uint64_t next_index_ = 0;
  uint64_t next_to_send_ = 0;
  int64_t in_flight_ = 0;
  bool writing_ = false;
  bool write_failed_ = false;
  bool bad_message_sent_ = false;  // a call that did not parse was reached in send order
  bool read_again_ = false;
  bool reading_ = false;  // a read is outstanding
  bool reads_done_ = false;
  int holds_ = 0;
  bool finished_ = false;
  absl::Status error_;
  std::string who_ = "before its Hello";  // for logs
};

CheckService::CheckService(ServiceOptions options, CallHandler handler, WorkQueue* queue,
                           ServerMetrics* metrics)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      queue_(queue),
      metrics_(metrics) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* CheckService::Check(
    grpc::CallbackServerContext* context) {
  auto* reactor = new Reactor(this, context->peer(), ++session_counter_);
  if (active_.fetch_add(1) >= static_cast<int>(options_.max_streams)) {
    active_.fetch_sub(1);
    reactor->Refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("server busy: ", options_.max_streams,
                                              " agent streams already open (parity.max_streams)")));
    return reactor;
  }
  reactor->Begin();
  return reactor;
}

}  // namespace parity::server
