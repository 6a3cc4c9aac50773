#include "common/torch/value_codec.h"

#include "parity/v1/parity.pb.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <limits>
#include <map>

#include "common/torch/torch_pch.h"
#include "common/wire/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/torch/ivalue_testing.h"

namespace parity::common {
namespace {

using ::parity::testing::BitwiseEqual;
using ::parity::testing::RandomBitsTensor;
using ::testing::HasSubstr;

// Encodes then decodes `v` and expects a bitwise-equal value back.
void ExpectRoundTrip(const c10::IValue& v, const c10::Type* hint = nullptr,
                     EncodeOptions options = {}) {
  v1::Value wire;
  absl::Status enc = EncodeValue(v, hint, options, "v", &wire);
  ASSERT_TRUE(enc.ok()) << enc;
  // Through the serialized bytes too, as on the network.
  v1::Value parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  ValueDecoder decoder(DecodeLimits{});
  c10::IValue back;
  absl::Status dec = decoder.Decode(parsed, "v", &back);
  ASSERT_TRUE(dec.ok()) << dec;
  std::string why;
  EXPECT_TRUE(BitwiseEqual(v, back, &why)) << why << "\nwire: " << wire.ShortDebugString();
}

const std::vector<at::ScalarType>& AllDTypes() {
  static const std::vector<at::ScalarType> kAll = {
      at::kBool, at::kByte,     at::kChar,  at::kShort,  at::kInt,          at::kLong,
      at::kHalf, at::kBFloat16, at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble};
  return kAll;
}

TEST(ValueCodecTest, RoundTripsEveryDTypeBitwise) {
  std::mt19937_64 rng(1);
  for (at::ScalarType dtype : AllDTypes()) {
    SCOPED_TRACE(c10::toString(dtype));
    ExpectRoundTrip(RandomBitsTensor(rng, dtype, {3, 5}));
  }
}

TEST(ValueCodecTest, RoundTripsZeroDimEmptyAndNonContiguousTensors) {
  std::mt19937_64 rng(2);
  at::Tensor base = RandomBitsTensor(rng, at::kFloat, {4, 6});
  ExpectRoundTrip(RandomBitsTensor(rng, at::kDouble, {}));                // 0-d
  ExpectRoundTrip(at::empty({0}, at::kFloat));                            // empty
  ExpectRoundTrip(at::empty({2, 0, 3}, at::kHalf));                       // empty, 3-d
  ExpectRoundTrip(base.t());                                              // transposed
  ExpectRoundTrip(base.slice(1, 1, 6, 2));                                // strided slice
  ExpectRoundTrip(base.select(0, 1).unsqueeze(0).expand({5, 6}));         // zero stride
  ExpectRoundTrip(RandomBitsTensor(rng, at::kComplexFloat, {3}).conj());  // lazy conj view
  ExpectRoundTrip(c10::IValue(at::Tensor()));                             // undefined
}

TEST(ValueCodecTest, KeepsSignedZeroAndNaNPayloads) {
  at::Tensor t = at::empty({4}, at::kFloat);
  uint32_t bits[4] = {0x80000000u /* -0.0 */, 0x7FC01234u /* quiet NaN, payload */,
                      0xFFA00001u /* signalling NaN, negative */, 0x00000001u /* subnormal */};
  std::memcpy(t.data_ptr(), bits, sizeof bits);
  ExpectRoundTrip(t);
  double nan_payload;
  uint64_t nan_bits = 0x7FF800000000BEEFull;
  std::memcpy(&nan_payload, &nan_bits, 8);
  ExpectRoundTrip(c10::IValue(nan_payload));
  ExpectRoundTrip(c10::IValue(-0.0));
}

TEST(ValueCodecTest, RoundTripsScalarsStringsNoneAndDevices) {
  ExpectRoundTrip(c10::IValue(std::numeric_limits<int64_t>::min()));
  ExpectRoundTrip(c10::IValue(std::numeric_limits<int64_t>::max()));
  ExpectRoundTrip(c10::IValue(std::numeric_limits<double>::infinity()));
  ExpectRoundTrip(c10::IValue(true));
  ExpectRoundTrip(c10::IValue(std::string("tanh\0\xE2\x82\xAC", 8)));  // NUL and UTF-8
  ExpectRoundTrip(c10::IValue());
  ExpectRoundTrip(c10::IValue(c10::complex<double>(1.5, -0.0)));
  ExpectRoundTrip(c10::IValue(c10::Device("cpu")));
  ExpectRoundTrip(c10::IValue(c10::Device("cuda:1")));
}

TEST(ValueCodecTest, RoundTripsEveryListKind) {
  std::mt19937_64 rng(3);
  at::Tensor a = RandomBitsTensor(rng, at::kFloat, {2});
  at::Tensor b = RandomBitsTensor(rng, at::kLong, {3, 1});
  ExpectRoundTrip(c10::IValue(c10::List<int64_t>({1, -2, 3})));
  ExpectRoundTrip(c10::IValue(c10::List<double>({0.5, -0.0})));
  ExpectRoundTrip(c10::IValue(c10::List<bool>({true, false})));
  ExpectRoundTrip(c10::IValue(c10::List<at::Tensor>({a, b})));
  c10::List<c10::optional<at::Tensor>> opt;
  opt.push_back(a);
  opt.push_back(c10::nullopt);
  ExpectRoundTrip(c10::IValue(opt));
  ExpectRoundTrip(c10::IValue(c10::List<c10::complex<double>>({{1, 2}, {3, -4}})));
  ExpectRoundTrip(c10::IValue(c10::List<std::string>({"a", ""})));
  // Empty lists keep their kind.
  ExpectRoundTrip(c10::IValue(c10::List<int64_t>()));
  ExpectRoundTrip(c10::IValue(c10::List<at::Tensor>()));
  ExpectRoundTrip(c10::IValue(c10::List<c10::optional<at::Tensor>>()));
  // Nested: int[][].
  c10::List<c10::List<int64_t>> nested;
  nested.push_back(c10::List<int64_t>({1, 2}));
  nested.push_back(c10::List<int64_t>({}));
  ExpectRoundTrip(c10::IValue(nested));
  // Tuples (ops such as native_layer_norm return them; inputs can carry them too).
  ExpectRoundTrip(c10::IValue(c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(2)})));
  // A generic list of optional floats.
  c10::List<c10::optional<double>> od;
  od.push_back(1.0);
  od.push_back(c10::nullopt);
  ExpectRoundTrip(c10::IValue(od));
}

// ScalarType, Layout and MemoryFormat travel as ints inside an IValue; the schema's real type
// lets them be sent as what they are.
TEST(ValueCodecTest, SendsEnumArgumentsAsTheirKindUsingSchemaHints) {
  const c10::FunctionSchema& schema =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::sum", "dim_IntList").schema();
  const c10::Argument& dtype_arg = schema.arguments().back();
  ASSERT_EQ(dtype_arg.name(), "dtype");
  v1::Value wire;
  ASSERT_TRUE(
      EncodeValue(c10::IValue(at::kBFloat16), dtype_arg.real_type().get(), {}, "dtype", &wire)
          .ok());
  EXPECT_EQ(wire.kind_case(), v1::Value::kDtype);
  EXPECT_EQ(wire.dtype(), v1::DTYPE_BFLOAT16);
  ExpectRoundTrip(c10::IValue(at::kBFloat16), dtype_arg.real_type().get());

  const c10::FunctionSchema& empty =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::empty", "memory_format").schema();
  for (const c10::Argument& arg : empty.arguments()) {
    if (arg.name() == "layout") {
      ExpectRoundTrip(c10::IValue(at::kStrided), arg.real_type().get());
      v1::Value w;
      ASSERT_TRUE(EncodeValue(c10::IValue(at::kStrided), arg.real_type().get(), {}, "l", &w).ok());
      EXPECT_EQ(w.layout(), v1::LAYOUT_STRIDED);
    }
    if (arg.name() == "memory_format") {
      v1::Value w;
      ASSERT_TRUE(EncodeValue(c10::IValue(at::MemoryFormat::ChannelsLast), arg.real_type().get(),
                              {}, "m", &w)
                      .ok());
      EXPECT_EQ(w.memory_format(), v1::MEMORY_FORMAT_CHANNELS_LAST);
      ExpectRoundTrip(c10::IValue(at::MemoryFormat::ChannelsLast), arg.real_type().get());
    }
  }
}

// Seeded property test: random dtypes, ranks, sizes (zeros included), views and bit patterns.
TEST(ValueCodecTest, PropertyRandomTensorsRoundTripBitwise) {
  std::mt19937_64 rng(20261122);
  const auto& dtypes = AllDTypes();
  for (int iter = 0; iter < 400; ++iter) {
    const at::ScalarType dtype = dtypes[rng() % dtypes.size()];
    const int rank = static_cast<int>(rng() % 5);
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) shape.push_back(static_cast<int64_t>(rng() % 7));
    at::Tensor t = RandomBitsTensor(rng, dtype, shape);
    // A random view: transpose, step slice, permutation or broadcast.
    if (rank >= 2 && rng() % 2) t = t.transpose(0, rank - 1);
    if (rank >= 1 && t.size(0) > 1 && rng() % 2) t = t.slice(0, 0, t.size(0), 2);
    if (rng() % 4 == 0) {  // broadcast: a new leading dim with stride 0
      std::vector<int64_t> wide = {2};
      wide.insert(wide.end(), t.sizes().begin(), t.sizes().end());
      t = t.unsqueeze(0).expand(wide);
    }
    SCOPED_TRACE(::testing::Message() << "iter " << iter << " dtype " << dtype << " shape "
                                      << t.sizes() << " strides " << t.strides());
    ExpectRoundTrip(t);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) return;
  }
}

TEST(ValueCodecTest, LargeTensorsGoToBlobSinkOrStatistics) {
  struct Blobs : BlobSink, BlobSource {
    std::map<uint64_t, std::string> blobs;
    uint64_t AddBlob(std::string_view payload) override {
      blobs[blobs.size() + 1] = std::string(payload);
      return blobs.size();
    }
    const std::string* FindBlob(uint64_t id) const override {
      auto it = blobs.find(id);
      return it == blobs.end() ? nullptr : &it->second;
    }
  } blobs;
  at::Tensor t = at::arange(1000, at::kFloat);
  EncodeOptions chunked;
  chunked.max_inline_tensor_bytes = 100;
  chunked.blob_sink = &blobs;
  chunked.compute_crc32c = true;
  v1::Value wire;
  ASSERT_TRUE(EncodeValue(c10::IValue(t), nullptr, chunked, "t", &wire).ok());
  EXPECT_EQ(wire.tensor().form(), v1::DATA_FORM_CHUNKED);
  ValueDecoder with_blobs(DecodeLimits{}, &blobs);
  c10::IValue back;
  ASSERT_TRUE(with_blobs.Decode(wire, "t", &back).ok());
  EXPECT_TRUE(back.toTensor().equal(t));

  EncodeOptions stats;
  stats.max_inline_tensor_bytes = 100;
  v1::Value s;
  at::Tensor with_nan = t.clone();
  with_nan[3] = std::nan("");
  with_nan[4] = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(EncodeValue(c10::IValue(with_nan), nullptr, stats, "t", &s).ok());
  ASSERT_EQ(s.tensor().form(), v1::DATA_FORM_STATS_ONLY);
  EXPECT_TRUE(s.tensor().data().empty());
  at::Tensor finite = with_nan.masked_select(at::isfinite(with_nan)).to(at::kDouble);
  EXPECT_EQ(s.tensor().stats().nan_count(), 1u);
  EXPECT_EQ(s.tensor().stats().inf_count(), 1u);
  EXPECT_DOUBLE_EQ(s.tensor().stats().min(), 0.0);
  EXPECT_DOUBLE_EQ(s.tensor().stats().max(), 999.0);
  EXPECT_DOUBLE_EQ(s.tensor().stats().mean(), finite.mean().item<double>());
  EXPECT_NEAR(s.tensor().stats().l2_norm(), finite.norm().item<double>(), 1e-6);
  ValueDecoder decoder(DecodeLimits{});
  absl::Status st = decoder.Decode(s, "outputs[0]", &back);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("statistics only"));
}

TEST(ValueCodecTest, RefusesValuesThatCannotTravel) {
  v1::Value wire;
  at::Tensor sparse = at::eye(3).to_sparse();
  absl::Status s = EncodeValue(c10::IValue(sparse), nullptr, {}, "inputs[0]", &wire);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("inputs[0]"));
  at::Tensor q = at::quantize_per_tensor(at::ones({2}), 0.1, 0, at::kQInt8);
  EXPECT_EQ(EncodeValue(c10::IValue(q), nullptr, {}, "q", &wire).code(),
            absl::StatusCode::kUnimplemented);
  s = EncodeValue(c10::IValue(std::string("\xE2\x82")), nullptr, {}, "inputs[1]", &wire);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "inputs[1]: string is not valid UTF-8");
  c10::IValue gen(at::detail::getDefaultCPUGenerator());
  s = EncodeValue(gen, nullptr, {}, "inputs[2]", &wire);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("Generator"));
}

}  // namespace
}  // namespace parity::common
