#include "common/transport/wire.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/sync_stream.h>

#include <utility>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace parity::common {

namespace {

// A ZeroCopyOutputStream into gRPC slices: small writes go to allocated blocks, and protobuf's
// aliased writes (bytes fields larger than the space left in a block) become slices over the
// caller's memory, each holding a reference to `owner`.
class SliceWriter final : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit SliceWriter(std::shared_ptr<const void> owner) : owner_(std::move(owner)) {}

  bool Next(void** data, int* size) override {
    if (used_ == block_.size()) {
      CloseBlock();
      block_ = grpc::Slice(kBlockBytes);
    }
    *data = const_cast<uint8_t*>(block_.begin()) + used_;
    *size = static_cast<int>(block_.size() - used_);
    used_ = block_.size();
    written_ += *size;
    return true;
  }
  void BackUp(int count) override {
    used_ -= count;
    written_ -= count;
  }
  int64_t ByteCount() const override { return written_; }
  bool AllowsAliasing() const override { return owner_ != nullptr; }
  bool WriteAliasedRaw(const void* data, int size) override {
    CloseBlock();
    slices_.emplace_back(
        const_cast<void*>(data), static_cast<std::size_t>(size),
        [](void* keep) { delete static_cast<std::shared_ptr<const void>*>(keep); },
        new std::shared_ptr<const void>(owner_));
    written_ += size;
    return true;
  }

  grpc::ByteBuffer Finish() {
    CloseBlock();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  static constexpr std::size_t kBlockBytes = 8192;

  void CloseBlock() {
    if (used_ > 0) slices_.push_back(block_.sub(0, used_));
    block_ = grpc::Slice();
    used_ = 0;
  }

  const std::shared_ptr<const void> owner_;
  grpc::Slice block_;
  std::size_t used_ = 0;
  int64_t written_ = 0;
  std::vector<grpc::Slice> slices_;
};

grpc::ByteBuffer SerializeInto(const google::protobuf::MessageLite& message,
                               std::shared_ptr<const void> owner) {
  message.ByteSizeLong();  // caches the sizes SerializeWithCachedSizes writes
  SliceWriter writer(std::move(owner));
  {
    google::protobuf::io::CodedOutputStream out(&writer);
    out.EnableAliasing(true);  // honoured only when the writer allows it (has an owner)
    message.SerializeWithCachedSizes(&out);
  }  // out flushes into the writer here
  return writer.Finish();
}

}  // namespace

grpc::ByteBuffer SerializeShared(std::shared_ptr<const google::protobuf::MessageLite> message) {
  const google::protobuf::MessageLite& m = *message;
  return SerializeInto(m, std::move(message));
}

grpc::ByteBuffer Serialize(const google::protobuf::MessageLite& message) {
  return SerializeInto(message, nullptr);
}

namespace {

// A length-delimited field's tag and length, as protobuf writes them.
grpc::Slice FieldHeader(uint32_t field, std::size_t length) {
  uint8_t bytes[16];
  std::size_t n = 0;
  auto varint = [&](uint64_t v) {
    while (v >= 0x80) {
      bytes[n++] = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    bytes[n++] = static_cast<uint8_t>(v);
  };
  varint((field << 3) | 2);  // wire type 2: length-delimited
  varint(length);
  return grpc::Slice(bytes, n);
}

}  // namespace

grpc::ByteBuffer SerializeBatch(uint32_t batch_field, const std::vector<grpc::ByteBuffer>& items) {
  constexpr uint32_t kMessagesField = 1;  // MessageBatch.messages, VerdictBatch.messages
  std::vector<grpc::Slice> slices(1);     // the outer header, once the length is known
  std::size_t inner = 0;
  for (const grpc::ByteBuffer& item : items) {
    const std::size_t length = item.Length();
    slices.push_back(FieldHeader(kMessagesField, length));
    inner += slices.back().size() + length;
    std::vector<grpc::Slice> parts;
    if (length > 0 && item.Dump(&parts).ok()) {
      for (grpc::Slice& part : parts) slices.push_back(std::move(part));
    }
  }
  slices[0] = FieldHeader(batch_field, inner);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

bool Parse(grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message) {
  grpc::ProtoBufferReader reader(&buffer);
  return message->ParseFromZeroCopyStream(&reader);
}

}  // namespace parity::common
