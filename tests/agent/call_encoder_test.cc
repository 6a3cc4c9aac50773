// The encoder with a connection's SentPayloads: equal tensors are sent once and named after.
#include "agent/call_encoder.h"

#include "common/torch/torch_pch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A captured aten::mul.Tensor call of `a` and `b` (snapshots: the tests' own tensors).
CapturedCall Mul(const at::Tensor& a, const at::Tensor& b) {
  CapturedCall c;
  c.meta.set_op_name("aten::mul");
  c.meta.set_overload("Tensor");
  c.inputs = {a, b};
  c.outputs = {a * b};
  return c;
}

TEST(CallEncoderTest, EqualTensorsAreSentOnceAndNamedAfter) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  enc.checksum = true;
  uint64_t next_blob = 0;
  const at::Tensor x = at::randn({64, 64});  // 16 KiB: reusable
  const at::Tensor w = at::randn({64, 64});
  const at::Tensor small = at::randn({8});  // under kReuseMinBytes: inline as before

  // The first call sends x, w and their product, all kept.
  CapturedCall first = Mul(x, w);
  EncodedCall e1 = EncodeCall(first, enc, &next_blob);
  ASSERT_TRUE(e1.with_data);
  ASSERT_EQ(e1.blobs.size(), 3u);
  for (const EncodedCall::Blob& b : e1.blobs) EXPECT_TRUE(b.keep) << b.id;
  EXPECT_EQ(e1.reused_bytes, 0u);
  EXPECT_TRUE(e1.message->call().kept_blob_ids().empty());

  // The second: x again (an equal copy, elsewhere in memory) and w twice: no bytes sent for
  // them, both listed once; only the new product travels.
  CapturedCall second = Mul(x.clone(), w);
  second.inputs = {x.clone(), w, w.clone()};  // a third input naming w again
  second.outputs = {(x * w) * w};
  EncodedCall e2 = EncodeCall(second, enc, &next_blob);
  ASSERT_TRUE(e2.with_data);
  ASSERT_EQ(e2.blobs.size(), 1u);
  EXPECT_EQ(e2.reused_bytes, 3u * 64 * 64 * 4);
  const v1::ApiCall& call = e2.message->call();
  EXPECT_THAT(call.kept_blob_ids(), ElementsAre(e1.blobs[0].id, e1.blobs[1].id));
  EXPECT_EQ(call.inputs(0).tensor().form(), v1::DATA_FORM_CHUNKED);
  EXPECT_EQ(call.inputs(0).tensor().blob_id(), e1.blobs[0].id);
  EXPECT_EQ(call.inputs(2).tensor().blob_id(), e1.blobs[1].id);
  // A named tensor still carries its checksum, shape and dtype.
  EXPECT_EQ(call.inputs(0).tensor().crc32c(), e1.message->call().inputs(0).tensor().crc32c());
  EXPECT_THAT(call.inputs(0).tensor().shape(), ElementsAre(64, 64));

  // Small tensors stay inline.
  CapturedCall third = Mul(small, small);
  EncodedCall e3 = EncodeCall(third, enc, &next_blob);
  EXPECT_THAT(e3.blobs, IsEmpty());
  EXPECT_EQ(e3.message->call().inputs(0).tensor().form(), v1::DATA_FORM_INLINE);
}

// A blob over one chunk (1 MiB) is kept too: its chunks go in order, keep on the first only.
TEST(CallEncoderTest, AKeptBlobOfSeveralChunksIsNamedAfter) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  uint64_t next_blob = 0;
  const at::Tensor big = at::randn({640, 1024});  // 2.5 MiB: three chunks
  CapturedCall first = Mul(big, big);
  first.outputs = {};
  EncodedCall e1 = EncodeCall(first, enc, &next_blob);
  ASSERT_EQ(e1.blobs.size(), 1u);  // the second input named the first within the call
  const EncodedCall::Blob& b = e1.blobs[0];
  EXPECT_TRUE(b.keep);
  ASSERT_EQ(b.chunks.size(), 3u);
  std::string joined;
  for (std::size_t i = 0; i < b.chunks.size(); ++i) {
    const v1::TensorChunk& c = b.chunks[i]->chunk();
    EXPECT_EQ(c.blob_id(), b.id);
    EXPECT_EQ(c.offset(), joined.size());
    EXPECT_EQ(c.total_bytes(), 640u * 1024 * 4);
    EXPECT_EQ(c.keep(), i == 0);
    joined += c.data();
  }
  EXPECT_EQ(joined, std::string(static_cast<const char*>(big.data_ptr()), 640 * 1024 * 4));
  CapturedCall second = Mul(big.clone(), big);
  second.outputs = {};
  EncodedCall e2 = EncodeCall(second, enc, &next_blob);
  EXPECT_TRUE(e2.blobs.empty());
  EXPECT_THAT(e2.message->call().kept_blob_ids(), ElementsAre(b.id));
}

TEST(CallEncoderTest, ACallThatCannotBeEncodedKeepsNothing) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  uint64_t next_blob = 0;
  const at::Tensor x = at::randn({64, 64});
  CapturedCall bad = Mul(x, x);
  // A sparse tensor cannot be sent: the call goes without data after x was tentatively kept.
  bad.inputs.push_back(at::eye(4).to_sparse());
  EncodedCall e = EncodeCall(bad, enc, &next_blob);
  EXPECT_FALSE(e.with_data);
  EXPECT_THAT(e.blobs, IsEmpty());
  EXPECT_EQ(sent.size(), 0u);
  // So the next call sends x in full.
  CapturedCall good = Mul(x, x);
  EncodedCall g = EncodeCall(good, enc, &next_blob);
  ASSERT_FALSE(g.blobs.empty());
  EXPECT_TRUE(g.message->call().kept_blob_ids().empty());
}

TEST(CallEncoderTest, WithoutATableEveryTensorIsSent) {
  CallEncoding enc;  // the server keeps nothing, or parity.reuse_bytes is 0
  uint64_t next_blob = 0;
  const at::Tensor x = at::randn({64, 64});
  for (int i = 0; i < 2; ++i) {
    CapturedCall c = Mul(x, x);
    EncodedCall e = EncodeCall(c, enc, &next_blob);
    EXPECT_THAT(e.blobs, IsEmpty());  // inline, as before reuse existed
    EXPECT_EQ(e.message->call().inputs(0).tensor().form(), v1::DATA_FORM_INLINE);
    EXPECT_EQ(e.reused_bytes, 0u);
  }
}

}  // namespace
}  // namespace parity::agent
