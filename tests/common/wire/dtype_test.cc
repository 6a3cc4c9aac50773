#include "common/wire/dtype.h"

#include "common/wire/crc32c.h"
#include "gtest/gtest.h"

namespace parity::common {
namespace {

TEST(DTypeTest, ElementSizesAndNames) {
  EXPECT_EQ(ElementSize(v1::DTYPE_BOOL), 1u);
  EXPECT_EQ(ElementSize(v1::DTYPE_BFLOAT16), 2u);
  EXPECT_EQ(ElementSize(v1::DTYPE_FLOAT32), 4u);
  EXPECT_EQ(ElementSize(v1::DTYPE_COMPLEX128), 16u);
  EXPECT_EQ(ElementSize(v1::DTYPE_UNSPECIFIED), 0u);
  EXPECT_EQ(TorchName(v1::DTYPE_FLOAT16), "torch.float16");
  EXPECT_FALSE(IsKnownDType(0));
  EXPECT_FALSE(IsKnownDType(13));
  EXPECT_TRUE(IsKnownDType(v1::DTYPE_INT16));
}

TEST(DTypeTest, ParsesCommonSpellings) {
  EXPECT_EQ(ParseDType("torch.bfloat16"), v1::DTYPE_BFLOAT16);
  EXPECT_EQ(ParseDType("fp16"), v1::DTYPE_FLOAT16);
  EXPECT_EQ(ParseDType("Float"), v1::DTYPE_FLOAT32);
  EXPECT_EQ(ParseDType("float8"), std::nullopt);
}

TEST(Crc32cTest, MatchesKnownVectors) {
  // RFC 3720 B.4 test vectors.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  // Incremental equals one-shot.
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);
}

}  // namespace
}  // namespace parity::common
