// The agent's torch half writes parity.v1.Value with its own wire writer (no protobuf header:
// common/wire/proto_writer.h). Its bytes must be exactly what libprotobuf writes for the same
// message, for every kind of value: parsed by protobuf and serialized again, they come back
// byte for byte.
#include "common/torch/wire_encoder.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "common/torch/torch_pch.h"
#include "common/wire/crc32c.h"
#include "common/wire/proto_writer.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {
namespace {

class MapSink : public BlobSink {
 public:
  uint64_t AddBlob(std::string_view bytes) override {
    blobs[++next] = std::string(bytes);
    return next;
  }
  std::map<uint64_t, std::string> blobs;
  uint64_t next = 1000;
};

// `v` written by the wire writer; expects protobuf to parse it and serialize the same bytes.
v1::Value ExpectProtobufBytes(const c10::IValue& v, const c10::Type* hint = nullptr,
                              EncodeOptions options = {}) {
  wire::Message m;
  std::vector<c10::IValue> keep;
  const EncodeError e = EncodeValueWire(v, hint, options, "v", &m, &keep);
  EXPECT_TRUE(e.ok()) << e.message;
  const std::string ours = m.Serialize();
  EXPECT_EQ(ours.size(), m.ByteSize());
  v1::Value parsed;
  EXPECT_TRUE(parsed.ParseFromString(ours));
  std::string theirs;
  {
    google::protobuf::io::StringOutputStream stream(&theirs);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    parsed.SerializeToCodedStream(&out);
  }
  EXPECT_EQ(ours, theirs) << parsed.ShortDebugString();
  return parsed;
}

const c10::Type* ArgType(const char* op, const char* overload, std::size_t i) {
  auto h = c10::Dispatcher::singleton().findSchema({op, overload});
  return h ? h->schema().arguments()[i].real_type().get() : nullptr;
}

TEST(WireWriterTest, TensorsOfEveryDTypeAndLayoutAreProtobufsBytes) {
  for (at::ScalarType t :
       {at::kBool, at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kHalf, at::kBFloat16,
        at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble}) {
    ExpectProtobufBytes(at::ones({2, 3}, at::TensorOptions().dtype(t)));
  }
  ExpectProtobufBytes(at::randn({4, 5}).t());            // strides of a view
  ExpectProtobufBytes(at::randn({3}).requires_grad_());  // requires_grad
  ExpectProtobufBytes(at::randn({}));                    // 0-d: no shape field
  ExpectProtobufBytes(at::empty({0, 7}));                // empty: no data field
  ExpectProtobufBytes(at::Tensor());                     // undefined
  ExpectProtobufBytes(at::randn({2, 2}, at::kComplexFloat).conj());
}

TEST(WireWriterTest, BlobsStatisticsAndChecksumsAreProtobufsBytes) {
  MapSink sink;
  EncodeOptions chunked;
  chunked.max_inline_tensor_bytes = 64;
  chunked.blob_sink = &sink;
  chunked.compute_crc32c = true;
  const at::Tensor big = at::randn({100});
  v1::Value v = ExpectProtobufBytes(big, nullptr, chunked);
  ASSERT_EQ(v.tensor().form(), v1::DATA_FORM_CHUNKED);
  const std::string& blob = sink.blobs.at(v.tensor().blob_id());
  EXPECT_EQ(blob, std::string(static_cast<const char*>(big.data_ptr()), 400));
  EXPECT_EQ(v.tensor().crc32c(), Crc32c(blob));

  EncodeOptions stats;
  stats.max_inline_tensor_bytes = 64;
  stats.max_tensor_bytes = 64;
  at::Tensor odd = at::randn({100});
  odd[3] = std::numeric_limits<float>::quiet_NaN();
  odd[4] = -std::numeric_limits<float>::infinity();
  v = ExpectProtobufBytes(odd, nullptr, stats);
  ASSERT_EQ(v.tensor().form(), v1::DATA_FORM_STATS_ONLY);
  EXPECT_EQ(v.tensor().stats().nan_count(), 1u);
  EXPECT_EQ(v.tensor().stats().inf_count(), 1u);
  EXPECT_GT(v.tensor().stats().l2_norm(), 0);
  ExpectProtobufBytes(at::zeros({100}), nullptr, stats);  // zero statistics are left out

  EncodeOptions inline_crc;
  inline_crc.compute_crc32c = true;
  v = ExpectProtobufBytes(at::arange(6, at::kFloat), nullptr, inline_crc);
  EXPECT_TRUE(v.tensor().has_crc32c());
}

TEST(WireWriterTest, ScalarsListsAndHintedIntsAreProtobufsBytes) {
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{300},
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(ExpectProtobufBytes(c10::IValue(i)).int_value(), i);
  }
  for (double d : {0.0, -0.0, 1.5, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::denorm_min()}) {
    const v1::Value v = ExpectProtobufBytes(c10::IValue(d));
    EXPECT_EQ(std::signbit(v.double_value()), std::signbit(d));
  }
  ExpectProtobufBytes(c10::IValue(true));
  ExpectProtobufBytes(c10::IValue(false));
  ExpectProtobufBytes(c10::IValue());  // None
  ExpectProtobufBytes(c10::IValue(std::string("tanh")));
  ExpectProtobufBytes(c10::IValue(std::string("")));
  ExpectProtobufBytes(c10::IValue(c10::complex<double>(0.0, -2.5)));
  ExpectProtobufBytes(c10::IValue(c10::Device(c10::kCPU)));      // index -1
  ExpectProtobufBytes(c10::IValue(c10::Device(c10::kCUDA, 0)));  // index 0: left out
  ExpectProtobufBytes(c10::IValue(c10::Device(c10::kCUDA, 3)));
  ExpectProtobufBytes(c10::IValue(std::vector<int64_t>{1, -2, 3}));
  ExpectProtobufBytes(c10::IValue(std::vector<int64_t>{}));
  ExpectProtobufBytes(c10::IValue(std::vector<double>{0.5, -0.0}));
  ExpectProtobufBytes(c10::IValue(c10::List<bool>({true, false})));
  ExpectProtobufBytes(c10::IValue(std::vector<at::Tensor>{at::ones({2}), at::zeros({1})}));
  c10::List<c10::optional<at::Tensor>> optional_tensors;
  optional_tensors.push_back(at::ones({1}));
  optional_tensors.push_back(c10::nullopt);
  ExpectProtobufBytes(c10::IValue(optional_tensors));
  ExpectProtobufBytes(c10::IValue(c10::ivalue::Tuple::create({at::ones({1}), 2, 3.5})));
  // Ints a schema says are a dtype, a layout, a memory format.
  const v1::Value dtype = ExpectProtobufBytes(c10::IValue(static_cast<int64_t>(at::kHalf)),
                                              ArgType("aten::to", "dtype", 1));
  EXPECT_EQ(dtype.dtype(), v1::DTYPE_FLOAT16);
  const v1::Value format =
      ExpectProtobufBytes(c10::IValue(static_cast<int64_t>(at::MemoryFormat::ChannelsLast)),
                          ArgType("aten::contiguous", "", 1));
  EXPECT_EQ(format.memory_format(), v1::MEMORY_FORMAT_CHANNELS_LAST);
}

TEST(WireWriterTest, WhatCannotBeSentIsRefusedNamingItsPath) {
  wire::Message m;
  std::vector<c10::IValue> keep;
  EncodeError e =
      EncodeValueWire(c10::IValue(at::eye(3).to_sparse()), nullptr, {}, "inputs[1]", &m, &keep);
  EXPECT_EQ(e.code, 12);
  EXPECT_NE(e.message.find("inputs[1]"), std::string::npos) << e.message;
  e = EncodeValueWire(c10::IValue(std::string("\xff\xfe")), nullptr, {}, "inputs[0]", &m, &keep);
  EXPECT_EQ(e.code, 3);
  std::vector<int32_t> only_float = {v1::DTYPE_FLOAT32};
  EncodeOptions opts;
  opts.accepted_dtypes = &only_float;
  e = EncodeValueWire(c10::IValue(at::ones({1}, at::kDouble)), nullptr, opts, "outputs[0]", &m,
                      &keep);
  EXPECT_EQ(e.code, 12);
  EXPECT_NE(e.message.find("accepted dtypes"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace parity::common
