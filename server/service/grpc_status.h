// The one place an absl::Status becomes a grpc::Status: what a refused or failed stream ends
// with (the code kept, the message truncated to 1 KiB, as gRPC carries it in a trailer).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace parity::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace parity::server
