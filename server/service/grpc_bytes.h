// MessageBytes to and from gRPC's buffer: for the reactor (what it reads and writes) and the code
// that parses or serializes the stream's messages. Neither conversion copies the bytes.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include "google/protobuf/message_lite.h"
#include "server/service/message_bytes.h"

namespace parity::server {

// Takes `buffer`'s slices (it is left empty).
MessageBytes FromGrpc(grpc::ByteBuffer&& buffer);
// The buffer inside `bytes` (an empty one, made now, for bytes that have none).
grpc::ByteBuffer& AsGrpc(MessageBytes& bytes);

// `message` serialized (copied: for small messages, the answers and verdicts).
MessageBytes SerializeMessage(const google::protobuf::MessageLite& message);
// Parses `bytes` into `message`; false if they are not such a message.
bool ParseMessage(MessageBytes& bytes, google::protobuf::MessageLite* message);

}  // namespace parity::server
