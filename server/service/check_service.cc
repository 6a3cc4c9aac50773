#include "server/service/check_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/stream_reactor.h"

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
