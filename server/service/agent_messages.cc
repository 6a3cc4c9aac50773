#include "server/service/agent_messages.h"

#include "parity/v1/parity.pb.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/wire/limits.h"
#include "server/service/grpc_bytes.h"

namespace parity::server {
namespace {

absl::Status HelloStringTooLong(absl::string_view field, std::size_t bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat("Hello.", field, ": ", bytes, " bytes, at most ", kMaxHelloStringBytes));
}

}  // namespace

Peek PeekMessage(MessageBytes& message) {
  grpc::ByteBuffer& buffer = AsGrpc(message);
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
    } else if (t == WireFormatLite::MakeTag(v1::ApiCall::kKeptBlobIdsFieldNumber,
                                            WireFormatLite::WIRETYPE_VARINT)) {
      uint64_t id = 0;  // unpacked, as a parser must accept
      if (!in.ReadVarint64(&id)) break;
      peek.kept_blob_ids.push_back(id);
    } else if (t == WireFormatLite::MakeTag(v1::ApiCall::kKeptBlobIdsFieldNumber,
                                            WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      uint32_t bytes = 0;  // packed
      if (!in.ReadVarint32(&bytes)) break;
      const auto limit = in.PushLimit(static_cast<int>(bytes));
      uint64_t id = 0;
      while (in.BytesUntilLimit() > 0 && in.ReadVarint64(&id)) peek.kept_blob_ids.push_back(id);
      const bool whole = in.BytesUntilLimit() == 0;
      in.PopLimit(limit);
      if (!whole) return peek;  // malformed: the worker's parse says so
    } else if (!WireFormatLite::SkipField(&in, t)) {
      return peek;  // malformed: the worker's parse says so
    }
  }
  peek.well_formed = in.ConsumedEntireMessage();
  return peek;
}

namespace {

// The bytes [offset, offset + length) of `slices` as a ByteBuffer of sub-slices.
grpc::ByteBuffer Range(const std::vector<grpc::Slice>& slices, std::size_t offset,
                       std::size_t length) {
  std::vector<grpc::Slice> parts;
  std::size_t start = 0;  // of the current slice within the whole
  for (const grpc::Slice& slice : slices) {
    const std::size_t end = start + slice.size();
    if (end > offset && start < offset + length) {
      const std::size_t from = std::max(offset, start) - start;
      const std::size_t to = std::min(offset + length, end) - start;
      parts.push_back(slice.sub(from, to));
    }
    start = end;
    if (start >= offset + length) break;
  }
  return grpc::ByteBuffer(parts.data(), parts.size());
}

}  // namespace

absl::StatusOr<std::vector<MessageBytes>> SplitBatch(MessageBytes& message) {
  grpc::ByteBuffer& buffer = AsGrpc(message);
  using google::protobuf::internal::WireFormatLite;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("unreadable MessageBatch");
  grpc::ProtoBufferReader reader(&buffer);
  google::protobuf::io::CodedInputStream in(&reader);
  uint32_t length = 0;
  if (in.ReadTag() != WireFormatLite::MakeTag(v1::AgentMessage::kBatchFieldNumber,
                                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED) ||
      !in.ReadVarint32(&length)) {
    return absl::InvalidArgumentError("malformed MessageBatch");
  }
  std::vector<MessageBytes> items;
  const uint32_t item_tag = WireFormatLite::MakeTag(v1::MessageBatch::kMessagesFieldNumber,
                                                    WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  for (uint32_t t = in.ReadTag(); t != 0; t = in.ReadTag()) {
    if (t != item_tag) {
      if (!WireFormatLite::SkipField(&in, t)) break;
      continue;
    }
    if (items.size() == common::kMaxBatchItems) {
      return absl::ResourceExhaustedError(absl::StrCat("MessageBatch holds more than ",
                                                       common::kMaxBatchItems,
                                                       " items (the most one batch may hold)"));
    }
    uint32_t bytes = 0;
    if (!in.ReadVarint32(&bytes)) break;
    const std::size_t offset = static_cast<std::size_t>(in.CurrentPosition());
    if (!in.Skip(static_cast<int>(bytes))) break;
    items.push_back(FromGrpc(Range(slices, offset, bytes)));
  }
  if (!in.ConsumedEntireMessage() ||
      static_cast<std::size_t>(in.CurrentPosition()) != buffer.Length()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed MessageBatch (", buffer.Length(),
                                                   " bytes, ", items.size(), " items read)"));
  }
  return items;
}

absl::Status NotAMessage(uint64_t index, std::size_t bytes) {
  return absl::InvalidArgumentError(absl::StrCat(
      "message ", index + 1, " on this stream (", bytes,
      " bytes) is not a valid parity.v1.AgentMessage: is the client an agent of a different "
      "release, or something other than a Parity agent?"));
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

}  // namespace parity::server
