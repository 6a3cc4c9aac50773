#include "server/service/message_bytes.h"

#include "common/transport/wire.h"
#include "server/service/grpc_bytes.h"

namespace parity::server {

MessageBytes::MessageBytes() = default;
MessageBytes::~MessageBytes() = default;
MessageBytes::MessageBytes(MessageBytes&& other) noexcept = default;
MessageBytes& MessageBytes::operator=(MessageBytes&& other) noexcept = default;

MessageBytes::MessageBytes(const MessageBytes& other)
    : buffer_(other.buffer_ ? std::make_unique<grpc::ByteBuffer>(*other.buffer_) : nullptr) {}

MessageBytes& MessageBytes::operator=(const MessageBytes& other) {
  if (this != &other) {
    buffer_ = other.buffer_ ? std::make_unique<grpc::ByteBuffer>(*other.buffer_) : nullptr;
  }
  return *this;
}

std::size_t MessageBytes::size() const { return buffer_ ? buffer_->Length() : 0; }

void MessageBytes::Clear() { buffer_.reset(); }

MessageBytes FromGrpc(grpc::ByteBuffer&& buffer) {
  MessageBytes bytes;
  bytes.buffer_ = std::make_unique<grpc::ByteBuffer>();
  bytes.buffer_->Swap(&buffer);
  return bytes;
}

grpc::ByteBuffer& AsGrpc(MessageBytes& bytes) {
  if (!bytes.buffer_) bytes.buffer_ = std::make_unique<grpc::ByteBuffer>();
  return *bytes.buffer_;
}

MessageBytes SerializeMessage(const google::protobuf::MessageLite& message) {
  return FromGrpc(common::Serialize(message));
}

bool ParseMessage(MessageBytes& bytes, google::protobuf::MessageLite* message) {
  return common::Parse(AsGrpc(bytes), message);
}

}  // namespace parity::server
