#include "server/service/check_service.h"

#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
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

uint64_t TensorBytes(const v1::Value& v) {
  switch (v.kind_case()) {
    case v1::Value::kTensor:
      return v.tensor().data().size();
    case v1::Value::kList: {
      uint64_t n = 0;
      for (const auto& item : v.list().items()) n += TensorBytes(item);
      return n;
    }
    default:
      return 0;
  }
}

}  // namespace

// One agent stream. Every member shared between reactions (gRPC threads) and workers is guarded
// by mu_. The reactor deletes itself in OnDone, which gRPC calls only after Finish(); Finish is
// called only when no read, write or queued call is outstanding, and always as the last action
// of the thread that calls it, so nothing touches the reactor after it.
class CheckService::Reactor final
    : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  Reactor(CheckService* service, std::string peer, uint64_t session)
      : service_(service), peer_(std::move(peer)), session_(session) {
    if (service_->metrics_) service_->metrics_->AgentConnected();
  }

  void Begin() { StartRead(&in_); }

  void Refuse(const grpc::Status& status) {
    refused_ = true;
    Finish(status);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::unique_lock<std::mutex> lock(mu_);
      reads_done_ = true;
      Act(lock);
      return;
    }
    if (service_->metrics_) service_->metrics_->MessageBytes(in_.ByteSizeLong());
    {
      std::lock_guard<std::mutex> lock(mu_);
      holds_ = 1;  // this reaction's hold on the next read
    }
    absl::Status s = Handle();
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
    bool read = false, write = false, finish = false;
    if (read_again_ && !reads_done_) {
      read_again_ = false;
      read = true;
    }
    if (!writing_ && !outbox_.empty() && !write_failed_) {
      writing_ = true;
      out_ = std::move(outbox_.front());
      write = true;
    }
    if (!read && !write && !writing_ && reads_done_ && in_flight_ == 0 && !finished_ &&
        holds_ == 0) {
      finished_ = true;
      finish = true;
    }
    const absl::Status status = error_;
    lock.unlock();
    if (finish) {
      if (!status.ok() && service_->metrics_) {
        service_->metrics_->StreamError(absl::StatusCodeToString(status.code()));
      }
      if (!status.ok()) {
        common::LogWarning(absl::StrCat("stream from ", peer_, " (rank ", origin_.rank,
                                        ") ended: ", status.ToString()));
      }
      Finish(ToGrpcStatus(status));
      return;
    }
    // Both may be needed: a read and a write can be outstanding at once. The stream cannot
    // finish while either is, so the reactor outlives both calls.
    if (write) StartWrite(&out_);
    if (read) StartRead(&in_);
  }

  absl::Status Handle() {
    switch (in_.kind_case()) {
      case v1::AgentMessage::kHello:
        return OnHello(in_.hello());
      case v1::AgentMessage::kCall:
        if (!hello_) return NeedHello("ApiCall");
        return OnCall();
      case v1::AgentMessage::kChunk:
        if (!hello_) return NeedHello("TensorChunk");
        return OnChunk(in_.chunk());
      case v1::AgentMessage::kStats:
        if (!hello_) return NeedHello("AgentStats");
        OnStats(in_.stats());
        return absl::OkStatus();
      case v1::AgentMessage::kGoodbye:
        if (!hello_) return NeedHello("Goodbye");
        OnStats(in_.goodbye().final_stats());
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
                                 ", host ", hello.hostname(), ", pid ", hello.pid(), ", run ",
                                 hello.run_id(), ", from ", peer_));
    v1::ServerMessage reply;
    *reply.mutable_server_info() = service_->options_.server_info;
    reply.mutable_server_info()->set_protocol_version(kProtocolVersion);
    reply.mutable_server_info()->set_session_id(absl::StrCat(session_));
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back(std::move(reply));
    return absl::OkStatus();
  }

  absl::Status OnChunk(const v1::TensorChunk& chunk) {
    const auto& limits = service_->options_.limits;
    if (chunk.total_bytes() > limits.max_tensor_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensor ", chunk.blob_id(), ": total_bytes ", chunk.total_bytes(),
                       " exceeds max_tensor_bytes ", limits.max_tensor_bytes));
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
    pending_blob_bytes_ += chunk.data().size();
    if (pending_blob_bytes_ > limits.max_call_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensors awaiting their call: ", pending_blob_bytes_,
                       " bytes exceed max_call_bytes ", limits.max_call_bytes));
    }
    if (blob.empty()) blob.reserve(chunk.total_bytes());
    blob.append(chunk.data());
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
    last_stats_ = stats;
  }

  absl::Status OnCall() {
    auto call = std::make_shared<v1::ApiCall>();
    call->Swap(in_.mutable_call());
    if (service_->metrics_) service_->metrics_->CallReceived(call->phase());
    // Chunks sent since the previous call belong to this one.
    std::shared_ptr<BlobStore> blobs = std::move(blobs_);
    blobs_ = std::make_shared<BlobStore>();
    pending_blob_bytes_ = 0;
    uint64_t bytes = blobs->bytes();
    for (const auto& v : call->inputs()) bytes += TensorBytes(v);
    for (const auto& v : call->outputs()) bytes += TensorBytes(v);
    uint64_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = next_index_++;
      ++in_flight_;
      ++holds_;  // released below if queued, else by Resume() when a worker admits the call
    }
    WorkItem item;
    item.bytes = bytes;
    item.run = [this, index, call, blobs] {
      v1::ServerMessage msg;
      *msg.mutable_verdict() = service_->handler_(origin_, *call, *blobs);
      Deliver(index, std::move(msg));
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

  // A verdict is ready; send verdicts in arrival order.
  void Deliver(uint64_t index, v1::ServerMessage msg) {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.emplace(index, std::move(msg));
    for (auto it = ready_.find(next_to_send_); it != ready_.end();
         it = ready_.find(next_to_send_)) {
      if (!write_failed_) outbox_.push_back(std::move(it->second));
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
  v1::AgentMessage in_;
  bool hello_ = false;
  CallOrigin origin_;  // written at Hello, read by workers after (the queue orders the accesses)
  std::shared_ptr<BlobStore> blobs_ = std::make_shared<BlobStore>();
  uint64_t pending_blob_bytes_ = 0;
  v1::AgentStats last_stats_;

  std::mutex mu_;
  v1::ServerMessage out_;                 // the message being written
  std::deque<v1::ServerMessage> outbox_;  // front is out_ while writing_
  std::map<uint64_t, v1::ServerMessage> ready_;
  uint64_t next_index_ = 0;
  uint64_t next_to_send_ = 0;
  int64_t in_flight_ = 0;
  bool writing_ = false;
  bool write_failed_ = false;
  bool read_again_ = false;
  bool reads_done_ = false;
  int holds_ = 0;
  bool finished_ = false;
  absl::Status error_;
};

CheckService::CheckService(ServiceOptions options, CallHandler handler, WorkQueue* queue,
                           ServerMetrics* metrics)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      queue_(queue),
      metrics_(metrics) {}

grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>* CheckService::Check(
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
