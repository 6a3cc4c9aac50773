// A protobuf wire-format writer with no protobuf (or abseil) header: the agent's torch half
// encodes values with it, so that it can be compiled against any torch build, of either C++ ABI,
// beside a transport library that holds the real protobuf (docs/design.md#two-halves).
//
// A message is built field by field, in the order written, and serialized once: each nested
// message's size is computed before its bytes are written, so a payload (a tensor's bytes)
// is copied once, into the output. Written as protobuf writes: fields in ascending number, and
// proto3 scalars that equal their default left out by the caller
// (tests/common/torch/wire_writer_test.cc compares the bytes with libprotobuf's own
// serialization).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace parity::wire {

class Message {
 public:
  Message() = default;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  Message(Message&&) = default;
  Message& operator=(Message&&) = default;

  // int32, int64, uint32, uint64, bool, enum: a varint (a negative int32 or int64 as ten bytes).
  void Varint(uint32_t field, uint64_t value);
  void Int(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Double(uint32_t field, double value);
  void Fixed32(uint32_t field, uint32_t value);
  // bytes or string: copied now.
  void Bytes(uint32_t field, std::string_view value);
  // bytes: not copied; `value` must stay valid until AppendTo has run.
  void BorrowedBytes(uint32_t field, std::string_view value);
  // repeated int64/uint64, packed (proto3's encoding of repeated scalars); nothing when empty.
  void PackedInts(uint32_t field, const int64_t* values, std::size_t n);
  // A nested message, written in its place; valid until this message is destroyed.
  Message& Sub(uint32_t field);

  // The serialized size (computed once; add nothing after asking).
  std::size_t ByteSize() const;
  void AppendTo(std::string* out) const;
  std::string Serialize() const {
    std::string out;
    AppendTo(&out);
    return out;
  }

  static std::size_t VarintSize(uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  }
  static void PutVarint(uint64_t v, std::string* out) {
    char buf[10];
    std::size_t n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out->append(buf, n);
  }

 private:
  enum class Kind : uint8_t { kVarint, kFixed64, kFixed32, kOwned, kBorrowed, kMessage };
  struct Field {
    Kind kind;
    uint32_t number;
    uint64_t scalar = 0;           // kVarint, kFixed64, kFixed32
    std::string owned;             // kOwned
    std::string_view borrowed;     // kBorrowed
    std::unique_ptr<Message> sub;  // kMessage
  };
  std::vector<Field> fields_;
  mutable std::size_t size_ = 0;
  mutable bool sized_ = false;
};

}  // namespace parity::wire
