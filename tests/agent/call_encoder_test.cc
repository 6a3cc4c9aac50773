// The encoder with a connection's SentPayloads: equal tensors are sent once and named after.
#include "agent/transport/call_encoder.h"
#include "parity/v1/parity.pb.h"

#include <grpcpp/support/byte_buffer.h>

#include "agent/torch/snapshot_cache.h"
#include "agent/torch/torch_values.h"
#include "common/torch/torch_pch.h"
#include "common/transport/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A captured aten::mul.Tensor call's values (snapshots: the tests' own tensors).
struct Values {
  std::vector<c10::IValue> inputs, outputs;
};
Values Mul(const at::Tensor& a, const at::Tensor& b) { return {{a, b}, {a * b}}; }

// `v` encoded as the sender does, through the torch half's parity_values; `call` is the ApiCall
// as the server parses it.
struct Encoded {
  EncodedCall e;
  v1::ApiCall call;
};
Encoded Encode(const Values& v, const CallEncoding& enc, uint64_t* next_blob) {
  CapturedCall c;
  c.meta.op_name = "aten::mul";
  c.meta.overload = "Tensor";
  auto values = std::make_unique<TorchValues>();
  values->op = "aten::mul";
  values->overload = "Tensor";
  values->inputs = v.inputs;
  values->outputs = v.outputs;
  c.SetValues(MakeParityValues(std::move(values)));
  Encoded r;
  r.e = EncodeCall(c, enc, next_blob);
  grpc::ByteBuffer bytes = r.e.TakeMessage();
  v1::AgentMessage m;
  EXPECT_TRUE(common::Parse(bytes, &m));
  r.call = m.call();
  return r;
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
  Encoded r1 = Encode(Mul(x, w), enc, &next_blob);
  EncodedCall& e1 = r1.e;
  ASSERT_TRUE(e1.with_data);
  ASSERT_EQ(e1.blobs.size(), 3u);
  for (const EncodedCall::Blob& b : e1.blobs) EXPECT_TRUE(b.keep) << b.id;
  EXPECT_EQ(e1.reused_bytes, 0u);
  EXPECT_TRUE(r1.call.kept_blob_ids().empty());

  // The second: x again (an equal copy, elsewhere in memory) and w twice: no bytes sent for
  // them, both listed once; only the new product travels.
  Values second = Mul(x.clone(), w);
  second.inputs = {x.clone(), w, w.clone()};  // a third input naming w again
  second.outputs = {(x * w) * w};
  Encoded r2 = Encode(second, enc, &next_blob);
  EncodedCall& e2 = r2.e;
  ASSERT_TRUE(e2.with_data);
  ASSERT_EQ(e2.blobs.size(), 1u);
  EXPECT_EQ(e2.reused_bytes, 3u * 64 * 64 * 4);
  const v1::ApiCall& call = r2.call;
  EXPECT_THAT(call.kept_blob_ids(), ElementsAre(e1.blobs[0].id, e1.blobs[1].id));
  EXPECT_EQ(call.inputs(0).tensor().form(), v1::DATA_FORM_CHUNKED);
  EXPECT_EQ(call.inputs(0).tensor().blob_id(), e1.blobs[0].id);
  EXPECT_EQ(call.inputs(2).tensor().blob_id(), e1.blobs[1].id);
  // A named tensor still carries its checksum, shape and dtype.
  EXPECT_EQ(call.inputs(0).tensor().crc32c(), r1.call.inputs(0).tensor().crc32c());
  EXPECT_THAT(call.inputs(0).tensor().shape(), ElementsAre(64, 64));

  // Small tensors stay inline.
  Encoded r3 = Encode(Mul(small, small), enc, &next_blob);
  EXPECT_THAT(r3.e.blobs, IsEmpty());
  EXPECT_EQ(r3.call.inputs(0).tensor().form(), v1::DATA_FORM_INLINE);
}

// A snapshot kept in the training's layout (a transposed weight, as addmm reads it) travels
// row-major, as the wire says; given again, it is named by its blob id without being made
// contiguous or read (the snapshot cache's blobs_named counts it).
TEST(CallEncoderTest, ASnapshotInItsOwnLayoutTravelsRowMajorAndIsNamedAfter) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  uint64_t next_blob = 0;
  const at::Tensor weight_t = at::randn({96, 64}).t();  // 24 KiB: reusable
  ASSERT_FALSE(weight_t.is_contiguous());
  const at::Tensor x = at::randn({8, 96});
  Values first{{x, weight_t}, {}};
  Encoded r1 = Encode(first, enc, &next_blob);
  ASSERT_EQ(r1.e.blobs.size(), 1u);
  std::string payload;
  for (const auto& c : r1.e.blobs[0].chunks) payload += c->chunk().data();
  const at::Tensor row_major = weight_t.contiguous();
  EXPECT_EQ(payload, std::string(static_cast<const char*>(row_major.data_ptr()), 64 * 96 * 4));
  EXPECT_THAT(r1.call.inputs(1).tensor().shape(), ElementsAre(64, 96));
  EXPECT_THAT(r1.call.inputs(1).tensor().original_strides(), ElementsAre(1, 64));

  const uint64_t named = GetSnapshotCacheStats().blobs_named;
  Values second{{x, weight_t}, {}};
  Encoded r2 = Encode(second, enc, &next_blob);
  EXPECT_TRUE(r2.e.blobs.empty());
  EXPECT_EQ(r2.call.inputs(1).tensor().blob_id(), r1.e.blobs[0].id);
  EXPECT_THAT(r2.call.kept_blob_ids(), ElementsAre(r1.e.blobs[0].id));
  EXPECT_EQ(GetSnapshotCacheStats().blobs_named - named, 1u) << "not named by the snapshot";
}

// A blob over one chunk (1 MiB) is kept too: its chunks go in order, keep on the first only.
TEST(CallEncoderTest, AKeptBlobOfSeveralChunksIsNamedAfter) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  uint64_t next_blob = 0;
  const at::Tensor big = at::randn({640, 1024});  // 2.5 MiB: three chunks
  Values first = Mul(big, big);
  first.outputs = {};
  Encoded r1 = Encode(first, enc, &next_blob);
  EncodedCall& e1 = r1.e;
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
  Values second = Mul(big.clone(), big);
  second.outputs = {};
  Encoded r2 = Encode(second, enc, &next_blob);
  EXPECT_TRUE(r2.e.blobs.empty());
  EXPECT_THAT(r2.call.kept_blob_ids(), ElementsAre(b.id));
}

TEST(CallEncoderTest, ACallThatCannotBeEncodedKeepsNothing) {
  SentPayloads sent(uint64_t{64} << 20);
  CallEncoding enc;
  enc.sent = &sent;
  uint64_t next_blob = 0;
  const at::Tensor x = at::randn({64, 64});
  Values bad = Mul(x, x);
  // A sparse tensor cannot be sent: the call goes without data after x was tentatively kept.
  bad.inputs.push_back(at::eye(4).to_sparse());
  Encoded e = Encode(bad, enc, &next_blob);
  EXPECT_FALSE(e.e.with_data);
  EXPECT_THAT(e.e.blobs, IsEmpty());
  EXPECT_EQ(sent.size(), 0u);
  EXPECT_THAT(e.call.skip_reason(), ::testing::HasSubstr("inputs[2]"));
  EXPECT_EQ(e.call.inputs_size(), 0);
  // So the next call sends x in full.
  Encoded g = Encode(Mul(x, x), enc, &next_blob);
  ASSERT_FALSE(g.e.blobs.empty());
  EXPECT_TRUE(g.call.kept_blob_ids().empty());
}

TEST(CallEncoderTest, WithoutATableEveryTensorIsSent) {
  CallEncoding enc;  // the server keeps nothing, or parity.reuse_bytes is 0
  uint64_t next_blob = 0;
  const at::Tensor x = at::randn({64, 64});
  for (int i = 0; i < 2; ++i) {
    Encoded e = Encode(Mul(x, x), enc, &next_blob);
    EXPECT_THAT(e.e.blobs, IsEmpty());  // inline, as before reuse existed
    EXPECT_EQ(e.call.inputs(0).tensor().form(), v1::DATA_FORM_INLINE);
    EXPECT_EQ(e.e.reused_bytes, 0u);
  }
}

// The transport gives a call's values back when it is done: the next call gets that object
// again (its vectors' capacity kept), emptied: nothing of the earlier call reaches the next.
TEST(CallEncoderTest, ReleasedValuesComeBackEmptyForTheNextCall) {
  auto values = NewTorchValues();
  values->op = "aten::mul";
  values->overload = "Tensor";
  values->inputs = {at::randn({8}), at::randn({8})};
  values->outputs = {at::randn({8})};
  values->bytes = 96;
  values->unchecked_writes.push_back("other: why");
  values->input_writes.push_back({1, "other", 8, 2, -1, at::randn({8}), {}, {}});
  values->inputs.reserve(16);
  const TorchValues* first = values.get();
  parity_values v = MakeParityValues(std::move(values));
  v.release(v.ctx);
  auto next = NewTorchValues();
  EXPECT_EQ(next.get(), first);
  EXPECT_TRUE(next->op.empty());
  EXPECT_TRUE(next->overload.empty());
  EXPECT_THAT(next->inputs, IsEmpty());
  EXPECT_GE(next->inputs.capacity(), 16u);
  EXPECT_THAT(next->outputs, IsEmpty());
  EXPECT_EQ(next->bytes, 0u);
  EXPECT_THAT(next->unchecked_writes, IsEmpty());
  EXPECT_THAT(next->input_writes, IsEmpty());
  EXPECT_FALSE(next->accelerator.has_value());
}

}  // namespace
}  // namespace parity::agent
