// Malformed and hostile input for the decoder: every case is a clear status, never a crash or an
// allocation beyond the caps.
#include <random>

#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "common/wire/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

v1::Value FloatTensor(std::vector<int64_t> shape, size_t bytes) {
  v1::Value v;
  v1::Tensor* t = v.mutable_tensor();
  t->set_dtype(v1::DTYPE_FLOAT32);
  for (int64_t d : shape) t->add_shape(d);
  t->mutable_data()->assign(bytes, '\0');
  return v;
}

absl::Status Decode(const v1::Value& v, const DecodeLimits& limits = {}) {
  ValueDecoder decoder(limits);
  c10::IValue out;
  return decoder.Decode(v, "inputs[0]", &out);
}

TEST(ValueDecoderTest, RejectsWrongByteCountNamingFieldAndNumbers) {
  absl::Status s = Decode(FloatTensor({3, 4}, 47));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "inputs[0].tensor.data: expected 48 bytes (12 elements x 4 bytes of torch.float32 "
            "for shape [3, 4]), got 47");
  EXPECT_EQ(Decode(FloatTensor({3, 4}, 49)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Decode(FloatTensor({3, 4}, 48)).ok());
}

TEST(ValueDecoderTest, RejectsNegativeDimension) {
  absl::Status s = Decode(FloatTensor({2, -3}, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inputs[0].tensor.shape[1]: negative dimension -3"));
}

TEST(ValueDecoderTest, RejectsHugeShapesBeforeAllocating) {
  // 2^62 elements: would overflow a naive byte count; must fail on the element cap.
  absl::Status s = Decode(FloatTensor({int64_t{1} << 31, int64_t{1} << 31}, 16));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("max_tensor_numel"));
  // Under the element cap but over the byte cap.
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  s = Decode(FloatTensor({1 << 19}, 4), limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("2097152 bytes"), HasSubstr("max_tensor_bytes 1048576")));
  // A zero dimension makes an empty tensor whatever the other dims are.
  EXPECT_TRUE(Decode(FloatTensor({0, int64_t{1} << 62}, 0)).ok());
}

// A cap like the others: RESOURCE_EXHAUSTED, as docs/configuration.md says of every limit.
TEST(ValueDecoderTest, RejectsTooManyDims) {
  absl::Status s = Decode(FloatTensor(std::vector<int64_t>(17, 1), 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("17 dimensions exceed max_dims 16"));
}

TEST(ValueDecoderTest, RejectsUnknownAndUnspecifiedDType) {
  v1::Value v = FloatTensor({1}, 4);
  v.mutable_tensor()->set_dtype(static_cast<v1::DType>(99));
  absl::Status s = Decode(v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inputs[0].tensor.dtype: unknown or unspecified dtype 99"));
  v.mutable_tensor()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(Decode(v).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValueDecoderTest, RejectsUnknownDataFormAndStrayPayload) {
  v1::Value v = FloatTensor({1}, 4);
  v.mutable_tensor()->set_form(static_cast<v1::DataForm>(7));
  EXPECT_THAT(Decode(v).message(), HasSubstr("unknown data form 7"));
  v.mutable_tensor()->set_form(v1::DATA_FORM_CHUNKED);
  EXPECT_THAT(Decode(v).message(), HasSubstr("must be empty for form DATA_FORM_CHUNKED"));
}

TEST(ValueDecoderTest, RejectsChunkedTensorWithoutOrWithWrongBlob) {
  v1::Value v = FloatTensor({4}, 0);
  v.mutable_tensor()->set_form(v1::DATA_FORM_CHUNKED);
  v.mutable_tensor()->set_blob_id(7);
  absl::Status s = Decode(v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no chunks were received for blob 7"));
  struct OneBlob : BlobSource {
    std::string blob = std::string(15, 'x');
    const std::string* FindBlob(uint64_t id) const override { return id == 7 ? &blob : nullptr; }
  } source;
  ValueDecoder decoder(DecodeLimits{}, &source);
  c10::IValue out;
  s = decoder.Decode(v, "outputs[1]", &out);
  EXPECT_THAT(s.message(), HasSubstr("blob 7 holds 15 bytes, expected 16"));
}

TEST(ValueDecoderTest, RejectsChecksumMismatch) {
  v1::Value v = FloatTensor({2}, 8);
  v.mutable_tensor()->set_crc32c(Crc32c(v.tensor().data()) ^ 1);
  absl::Status s = Decode(v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("checksum mismatch"));
  v.mutable_tensor()->set_crc32c(Crc32c(v.tensor().data()));
  EXPECT_TRUE(Decode(v).ok());
}

TEST(ValueDecoderTest, RejectsBoolBytesOtherThanZeroOrOne) {
  v1::Value v;
  v.mutable_tensor()->set_dtype(v1::DTYPE_BOOL);
  v.mutable_tensor()->add_shape(3);
  v.mutable_tensor()->set_data(std::string("\x01\x00\x02", 3));
  absl::Status s = Decode(v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bool element 2 has byte value 2"));
}

TEST(ValueDecoderTest, EnforcesPerCallByteBudgetAcrossValues) {
  DecodeLimits limits;
  limits.max_call_bytes = 100;
  ValueDecoder decoder(limits);
  c10::IValue out;
  ASSERT_TRUE(decoder.Decode(FloatTensor({20}, 80), "inputs[0]", &out).ok());
  absl::Status s = decoder.Decode(FloatTensor({20}, 80), "inputs[1]", &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("inputs[1]"), HasSubstr("max_call_bytes 100")));
}

TEST(ValueDecoderTest, EnforcesListLengthAndDepth) {
  DecodeLimits limits;
  limits.max_list_length = 3;
  limits.max_depth = 2;
  v1::Value list;
  list.mutable_list()->set_kind(v1::LIST_KIND_INT);
  for (int i = 0; i < 4; ++i) list.mutable_list()->add_items()->set_int_value(i);
  absl::Status s = Decode(list, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("4 items exceed max_list_length 3"));

  v1::Value deep;
  v1::Value* cur = &deep;
  for (int i = 0; i < 4; ++i) {
    cur->mutable_list()->set_kind(v1::LIST_KIND_GENERIC);
    cur = cur->mutable_list()->add_items();
  }
  cur->set_int_value(1);
  s = Decode(deep, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("inputs[0].list[0].list[0].list[0]: nesting depth"));
}

TEST(ValueDecoderTest, RejectsMistypedListItemsAndUnknownKinds) {
  v1::Value list;
  list.mutable_list()->set_kind(v1::LIST_KIND_INT);
  list.mutable_list()->add_items()->set_int_value(1);
  list.mutable_list()->add_items()->set_double_value(2.5);
  absl::Status s = Decode(list);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inputs[0].list[1]: a LIST_KIND_INT list cannot hold"));
  list.mutable_list()->set_kind(static_cast<v1::ListKind>(42));
  EXPECT_THAT(Decode(list).message(), HasSubstr("unknown list kind 42"));
  list.mutable_list()->set_kind(v1::LIST_KIND_UNSPECIFIED);
  EXPECT_EQ(Decode(list).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValueDecoderTest, RejectsEmptyValueUnknownEnumsAndDevices) {
  EXPECT_THAT(Decode(v1::Value()).message(), HasSubstr("inputs[0]: value has no kind set"));
  v1::Value v;
  v.set_dtype(static_cast<v1::DType>(55));
  EXPECT_THAT(Decode(v).message(), HasSubstr("unknown dtype 55"));
  v.set_layout(static_cast<v1::Layout>(9));
  EXPECT_THAT(Decode(v).message(), HasSubstr("unknown layout 9"));
  v.set_memory_format(static_cast<v1::MemoryFormat>(9));
  EXPECT_THAT(Decode(v).message(), HasSubstr("unknown format 9"));
  v.mutable_device()->set_type("warp-drive");
  EXPECT_THAT(Decode(v).message(), HasSubstr("unknown device type 'warp-drive'"));
  v.mutable_device()->set_type("cuda");
  v.mutable_device()->set_index(1000);
  EXPECT_THAT(Decode(v).message(), HasSubstr("device.index: out of range: 1000"));
}

TEST(ValueDecoderTest, RejectsOversizedStrings) {
  DecodeLimits limits;
  limits.max_string_bytes = 8;
  v1::Value v;
  v.set_string_value(std::string(9, 'a'));
  EXPECT_EQ(Decode(v, limits).code(), absl::StatusCode::kResourceExhausted);
}

// A deterministic smoke version of the fuzzer: random bytes and mutated valid messages never
// crash the decoder (the libFuzzer target explores far more; see tests/fuzz/).
TEST(ValueDecoderTest, SurvivesRandomAndMutatedBytes) {
  std::mt19937_64 rng(7);
  v1::Value seed = FloatTensor({2, 3}, 24);
  const std::string valid = seed.SerializeAsString();
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  int parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = valid;
    if (i % 2 == 0) {
      bytes.resize(rng() % 64);
      for (char& c : bytes) c = static_cast<char>(rng());
    } else {
      for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    v1::Value v;
    if (!v.ParseFromString(bytes)) continue;
    ++parsed;
    (void)Decode(v, limits);  // any status is fine; crashing or hanging is not
  }
  EXPECT_GT(parsed, 100);  // the loop really exercised the decoder
}

}  // namespace
}  // namespace parity::common
