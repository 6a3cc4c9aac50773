#include "common/wire/proto_writer.h"

namespace parity::wire {
namespace {

constexpr uint32_t kVarintType = 0, kFixed64Type = 1, kLengthType = 2, kFixed32Type = 5;

uint64_t Tag(uint32_t field, uint32_t type) { return (uint64_t{field} << 3) | type; }

}  // namespace

void Message::Varint(uint32_t field, uint64_t value) {
  fields_.push_back({Kind::kVarint, field, value, {}, {}, nullptr});
}

void Message::Double(uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  fields_.push_back({Kind::kFixed64, field, bits, {}, {}, nullptr});
}

void Message::Fixed32(uint32_t field, uint32_t value) {
  fields_.push_back({Kind::kFixed32, field, value, {}, {}, nullptr});
}

void Message::Bytes(uint32_t field, std::string_view value) {
  fields_.push_back({Kind::kOwned, field, 0, std::string(value), {}, nullptr});
}

void Message::BorrowedBytes(uint32_t field, std::string_view value) {
  fields_.push_back({Kind::kBorrowed, field, 0, {}, value, nullptr});
}

void Message::PackedInts(uint32_t field, const int64_t* values, std::size_t n) {
  if (n == 0) return;
  std::string packed;
  for (std::size_t i = 0; i < n; ++i) PutVarint(static_cast<uint64_t>(values[i]), &packed);
  fields_.push_back({Kind::kOwned, field, 0, std::move(packed), {}, nullptr});
}

Message& Message::Sub(uint32_t field) {
  fields_.push_back({Kind::kMessage, field, 0, {}, {}, std::make_unique<Message>()});
  return *fields_.back().sub;
}

std::size_t Message::ByteSize() const {
  if (sized_) return size_;
  std::size_t n = 0;
  for (const Field& f : fields_) {
    switch (f.kind) {
      case Kind::kVarint:
        n += VarintSize(Tag(f.number, kVarintType)) + VarintSize(f.scalar);
        break;
      case Kind::kFixed64:
        n += VarintSize(Tag(f.number, kFixed64Type)) + 8;
        break;
      case Kind::kFixed32:
        n += VarintSize(Tag(f.number, kFixed32Type)) + 4;
        break;
      case Kind::kOwned:
        n += VarintSize(Tag(f.number, kLengthType)) + VarintSize(f.owned.size()) + f.owned.size();
        break;
      case Kind::kBorrowed:
        n += VarintSize(Tag(f.number, kLengthType)) + VarintSize(f.borrowed.size()) +
             f.borrowed.size();
        break;
      case Kind::kMessage: {
        const std::size_t sub = f.sub->ByteSize();
        n += VarintSize(Tag(f.number, kLengthType)) + VarintSize(sub) + sub;
        break;
      }
    }
  }
  size_ = n;
  sized_ = true;
  return n;
}

void Message::AppendTo(std::string* out) const {
  out->reserve(out->size() + ByteSize());
  for (const Field& f : fields_) {
    switch (f.kind) {
      case Kind::kVarint:
        PutVarint(Tag(f.number, kVarintType), out);
        PutVarint(f.scalar, out);
        break;
      case Kind::kFixed64: {
        PutVarint(Tag(f.number, kFixed64Type), out);
        char b[8];
        for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((f.scalar >> (8 * i)) & 0xFF);
        out->append(b, 8);
        break;
      }
      case Kind::kFixed32: {
        PutVarint(Tag(f.number, kFixed32Type), out);
        char b[4];
        for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((f.scalar >> (8 * i)) & 0xFF);
        out->append(b, 4);
        break;
      }
      case Kind::kOwned:
        PutVarint(Tag(f.number, kLengthType), out);
        PutVarint(f.owned.size(), out);
        out->append(f.owned);
        break;
      case Kind::kBorrowed:
        PutVarint(Tag(f.number, kLengthType), out);
        PutVarint(f.borrowed.size(), out);
        out->append(f.borrowed.data(), f.borrowed.size());
        break;
      case Kind::kMessage:
        PutVarint(Tag(f.number, kLengthType), out);
        PutVarint(f.sub->ByteSize(), out);
        f.sub->AppendTo(out);
        break;
    }
  }
}

}  // namespace parity::wire
