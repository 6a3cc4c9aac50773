#include "server/service/grpc_status.h"

#include <string>

namespace parity::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  constexpr std::size_t kMax = 1024;
  if (message.size() > kMax) message = message.substr(0, kMax - 3) + "...";
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

}  // namespace parity::server
