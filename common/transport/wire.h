// The Check stream as bytes: both ends exchange grpc::ByteBuffers and serialize themselves, so
// that a call's tensors are sent from the message's own memory (no serialization copy) and the
// server can hand a call to a worker unparsed.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <vector>

#include "google/protobuf/message_lite.h"

namespace parity::common {

// The version of proto/parity/v1/parity.proto both ends speak (Hello.protocol_version).
inline constexpr uint32_t kProtocolVersion = 1;

// The full name of parity.v1.PrecisionChecker's Check method (a test checks it against the
// service's descriptor).
inline constexpr char kCheckMethod[] = "/parity.v1.PrecisionChecker/Check";

// `message` serialized. Its large bytes fields (tensor data) are not copied: the buffer holds
// slices over the message's memory and keeps the message alive until gRPC has sent them. The
// message must not change afterwards.
grpc::ByteBuffer SerializeShared(std::shared_ptr<const google::protobuf::MessageLite> message);

// `message` serialized (copied): for small messages.
grpc::ByteBuffer Serialize(const google::protobuf::MessageLite& message);
// The oneof fields that hold a batch: AgentMessage.batch (MessageBatch) and ServerMessage.batch
// (VerdictBatch); in both, the items are field 1.
inline constexpr uint32_t kAgentBatchField = 7;
inline constexpr uint32_t kServerBatchField = 3;
// A message holding, in its field `batch_field`, a batch of `items` (each a serialized message
// of the outer type: AgentMessages for kAgentBatchField, ServerMessages for kServerBatchField),
// made without copying them: a few bytes of field headers, then each item's own slices.
grpc::ByteBuffer SerializeBatch(uint32_t batch_field, const std::vector<grpc::ByteBuffer>& items);

// Options for a write that `more` writes follow at once: gRPC may then hold it back and send
// them together (a buffer hint); the last write of a burst goes out at once.
inline grpc::WriteOptions WriteOptionsFor(bool more) {
  return more ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions();
}

// Parses `buffer` into `message`; false if the bytes are not such a message.
bool Parse(grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message);

}  // namespace parity::common
