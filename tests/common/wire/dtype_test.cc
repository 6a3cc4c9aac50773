#include "common/wire/dtype.h"

#include <algorithm>
#include <iostream>
#include <random>
#include <string_view>

#include "common/wire/crc32c.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {
namespace {

TEST(DTypeTest, ElementSizesAndNames) {
  EXPECT_EQ(ElementSize(wire::kBool), 1u);
  EXPECT_EQ(ElementSize(wire::kBFloat16), 2u);
  EXPECT_EQ(ElementSize(wire::kFloat32), 4u);
  EXPECT_EQ(ElementSize(wire::kComplex128), 16u);
  EXPECT_EQ(ElementSize(wire::kDTypeUnspecified), 0u);
  EXPECT_EQ(TorchName(wire::kFloat16), "torch.float16");
  EXPECT_FALSE(IsKnownDType(0));
  EXPECT_FALSE(IsKnownDType(13));
  EXPECT_TRUE(IsKnownDType(wire::kInt16));
  EXPECT_FALSE(IsKnownDType(-1));
}

// The codec's own table (no proto in common/wire/dtype.cc) knows every dtype the wire defines,
// with a size: a DType added to the proto without a row here fails.
TEST(DTypeTest, EveryWireDTypeIsKnownWithASize) {
  const google::protobuf::EnumDescriptor* e = v1::DType_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const int dtype = e->value(i)->number();
    if (dtype == v1::DTYPE_UNSPECIFIED) continue;
    EXPECT_TRUE(IsKnownDType(dtype)) << e->value(i)->name();
    EXPECT_GT(ElementSize(static_cast<wire::DType>(dtype)), 0u) << e->value(i)->name();
  }
}

TEST(DTypeTest, ParsesCommonSpellings) {
  EXPECT_EQ(ParseDType("torch.bfloat16"), wire::kBFloat16);
  EXPECT_EQ(ParseDType("fp16"), wire::kFloat16);
  EXPECT_EQ(ParseDType("Float"), wire::kFloat32);
  EXPECT_EQ(ParseDType("float8"), std::nullopt);
}

TEST(Crc32cTest, MatchesKnownVectors) {
  // RFC 3720 B.4 test vectors.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  // Incremental equals one-shot.
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
}

// The CPU instruction's three interleaved streams (blocks of 8192 and 256 bytes, joined by a
// shift) against the portable slicing: every length around the block sizes, every misalignment,
// and one CRC continued over uneven pieces.
TEST(Crc32cTest, CpuInstructionMatchesPortable) {
  std::cout << "Crc32c uses the CPU's instruction: " << Crc32cUsesCpuInstruction() << "\n";
  std::mt19937 rng(7);
  std::string data(3 * 8192 * 2 + 3 * 256 + 64, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (std::size_t len : {0ul, 1ul, 7ul, 8ul, 9ul, 255ul, 256ul, 767ul, 768ul, 769ul, 24575ul,
                          24576ul, 24577ul, 50000ul}) {
    for (std::size_t offset = 0; offset < 9; ++offset) {
      const std::string_view piece(data.data() + offset, std::min(len, data.size() - offset));
      ASSERT_EQ(Crc32c(piece), Crc32cPortable(piece)) << len << " at " << offset;
      ASSERT_EQ(Crc32c(piece, 0x12345678u), Crc32cPortable(piece, 0x12345678u));
    }
  }
  uint32_t crc = 0;
  for (std::size_t at = 0, step = 1; at < data.size(); at += step, step = step * 3 + 1) {
    crc = Crc32c(std::string_view(data).substr(at, step), crc);
  }
  EXPECT_EQ(crc, Crc32cPortable(data));
}

}  // namespace
}  // namespace parity::common
