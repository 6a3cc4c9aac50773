// Every name form a filter accepts (common/naming/api_names.h), what it selects, msprobe's name of
// a call, and the warning for a name that selects nothing.
#include "common/naming/api_names.h"
#include "common/naming/selection.h"
#include "parity/v1/parity.pb.h"

#include "absl/strings/str_split.h"

#include "gtest/gtest.h"

namespace parity::common {
namespace {

v1::ApiCall Forward(const std::string& op, uint64_t index, const std::string& overload = "") {
  v1::ApiCall c;
  c.set_op_name(op);
  c.set_overload(overload);
  c.set_call_index(index);
  c.set_phase(v1::PHASE_FORWARD);
  return c;
}

// Backward call k of forward call `index` of `forward_op`, running `op`.
v1::ApiCall Backward(const std::string& op, const std::string& forward_op, uint64_t index,
                     uint32_t k = 0, const std::string& forward_overload = "") {
  v1::ApiCall c = Forward(op, index);
  c.set_phase(v1::PHASE_BACKWARD);
  c.set_forward_op_name(forward_op);
  c.set_forward_overload(forward_overload);
  c.set_backward_index(k);
  return c;
}

NamePattern P(const std::string& text) {
  absl::StatusOr<NamePattern> p = NamePattern::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *p : *NamePattern::Parse("never_matches_anything");
}

TEST(NamePatternTest, ParityCsvNamesSelectOneCallAndItsBackward) {
  const NamePattern p = P("aten::add.Tensor.3");
  EXPECT_TRUE(p.Matches(Forward("aten::add", 3, "Tensor")));
  EXPECT_FALSE(p.Matches(Forward("aten::add", 2, "Tensor")));
  EXPECT_FALSE(p.Matches(Forward("aten::add", 3, "Scalar")));
  EXPECT_TRUE(p.Matches(Backward("aten::sum", "aten::add", 3, 0, "Tensor")));

  const NamePattern k = P("aten::softmax.int.0.backward.1");
  EXPECT_TRUE(k.Matches(Backward("aten::mul", "aten::softmax", 0, 1, "int")));
  EXPECT_FALSE(k.Matches(Backward("aten::mul", "aten::softmax", 0, 0, "int")));
  EXPECT_FALSE(k.Matches(Forward("aten::softmax", 0, "int")));
}

TEST(NamePatternTest, OperatorNamesWithOrWithoutOverload) {
  EXPECT_TRUE(P("aten::add").Matches(Forward("aten::add", 5, "Scalar")));
  EXPECT_TRUE(P("aten::add").Matches(Forward("aten::add_", 5, "Tensor"))) << "in-place form";
  EXPECT_FALSE(P("aten::add_").Matches(Forward("aten::add", 5, "Tensor")));
  EXPECT_FALSE(P("aten::add").Matches(Forward("aten::addmm", 0)));
  EXPECT_FALSE(P("aten::add").Matches(Forward("npu::add", 0))) << "namespace kept";
  EXPECT_TRUE(P("aten::gelu.default").Matches(Forward("aten::gelu", 0)));
  EXPECT_FALSE(P("aten::add.Tensor").Matches(Forward("aten::add", 0, "Scalar")));
}

TEST(NamePatternTest, BareNamesMatchAnyNamespace) {
  EXPECT_TRUE(P("gelu").Matches(Forward("aten::gelu", 0)));
  EXPECT_TRUE(P("npu_rms_norm").Matches(Forward("npu::npu_rms_norm", 7)));
  EXPECT_TRUE(P("add").Matches(Forward("aten::add_", 0)));
  EXPECT_FALSE(P("add_").Matches(Forward("aten::add", 0)));
}

TEST(NamePatternTest, MsprobeApiNames) {
  EXPECT_TRUE(P("Functional.linear").Matches(Forward("aten::linear", 4)));
  EXPECT_TRUE(P("Functional.linear").Matches(Backward("aten::mm", "aten::linear", 4)));
  EXPECT_TRUE(P("Functional.linear.0.forward").Matches(Forward("aten::linear", 0)));
  EXPECT_FALSE(P("Functional.linear.0.forward").Matches(Forward("aten::linear", 1)));
  EXPECT_FALSE(P("Functional.linear.0.forward").Matches(Backward("aten::mm", "aten::linear", 0)));
  EXPECT_TRUE(P("Functional.linear.0.backward").Matches(Backward("aten::mm", "aten::linear", 0)));
  EXPECT_TRUE(P("Torch.matmul").Matches(Forward("aten::matmul", 0)));
  EXPECT_TRUE(P("Tensor.add_").Matches(Forward("aten::add_", 0, "Tensor")));
  EXPECT_FALSE(P("Tensor.add_").Matches(Forward("aten::add", 0, "Tensor")));
  EXPECT_TRUE(P("Tensor.__matmul__").Matches(Forward("aten::matmul", 0)));
  EXPECT_TRUE(P("Aten.mm").Matches(Forward("aten::mm", 0)));
  EXPECT_TRUE(P("Aten.mm.default.2.forward").Matches(Forward("aten::mm", 2)));
  EXPECT_FALSE(P("Aten.add.Scalar").Matches(Forward("aten::add", 0, "Tensor")));
  EXPECT_TRUE(P("NPU.npu_fusion_attention").Matches(Forward("npu::npu_fusion_attention", 0)));
  EXPECT_FALSE(P("NPU.npu_fusion_attention").Matches(Forward("aten::npu_fusion_attention", 0)));
  EXPECT_TRUE(P("Distributed.all_reduce").Matches(Forward("c10d::allreduce_", 0)));
  EXPECT_TRUE(P("VF.lstm").Matches(Forward("aten::lstm", 0)));
}

// A call named at its Python call site is selected as msprobe selects it: by the API as called
// ("Tensor.matmul" is not "Torch.matmul") and that API's own counter in the step, not the
// operator's; a call without one (a C++ training) by its operator and call index.
TEST(NamePatternTest, CallSiteCallsAreSelectedByTheirApiAndItsCounter) {
  auto site = [](const std::string& api, uint64_t api_index, uint64_t op_index) {
    v1::ApiCall c = Forward("aten::matmul", op_index);
    c.set_api(api);
    c.set_api_index(api_index);
    return c;
  };
  const NamePattern first = P("Tensor.matmul.0.forward");
  EXPECT_TRUE(first.Matches(site("Tensor.matmul", 0, 1)));   // torch.matmul ran first (op 0)
  EXPECT_FALSE(first.Matches(site("Torch.matmul", 0, 0)));   // torch.matmul's first call
  EXPECT_FALSE(first.Matches(site("Tensor.matmul", 1, 0)));  // Tensor.matmul's second
  EXPECT_TRUE(first.Matches(Forward("aten::matmul", 0)));    // no call site: the operator's
  EXPECT_TRUE(P("Tensor.matmul").Matches(site("Tensor.matmul", 5, 9)));
  EXPECT_FALSE(P("Tensor.matmul").Matches(site("Torch.matmul", 5, 9)));
  // A linked backward call carries its forward call's API and index.
  v1::ApiCall back = Backward("aten::mm", "aten::matmul", 1);
  back.set_api("Tensor.matmul");
  back.set_api_index(0);
  EXPECT_TRUE(P("Tensor.matmul.0.backward").Matches(back));
  EXPECT_FALSE(P("Tensor.matmul.0.forward").Matches(back));
  // Parity's own names and operator names keep selecting by operator.
  EXPECT_TRUE(P("aten::matmul").Matches(site("Torch.matmul", 0, 0)));
}

TEST(NamePatternTest, CompositeApisSelectTheOperatorsTheyRun) {
  for (const char* name : {"cross_entropy", "Functional.cross_entropy"}) {
    const NamePattern p = P(name);
    EXPECT_TRUE(p.Matches(Forward("aten::cross_entropy_loss", 0))) << name;
    EXPECT_TRUE(p.Matches(Forward("aten::nll_loss_nd", 0))) << name;
    EXPECT_TRUE(
        p.Matches(Backward("aten::_log_softmax_backward_data", "aten::cross_entropy_loss", 0)))
        << name;
    EXPECT_FALSE(p.Matches(Forward("aten::softmax", 0))) << name;
  }
  EXPECT_TRUE(P("Functional.pad").Matches(Forward("aten::constant_pad_nd", 0)));
  EXPECT_TRUE(P("Functional.layer_norm").Matches(Forward("aten::native_layer_norm", 0)));
}

TEST(NamePatternTest, MalformedNamesAreErrorsThatSayWhy) {
  EXPECT_EQ(NamePattern::Parse("").status().message(), "an empty name");
  EXPECT_EQ(NamePattern::Parse("  ").status().message(), "an empty name");
  EXPECT_NE(NamePattern::Parse("aten::add.Tensor.3.sideways")
                .status()
                .message()
                .find("unexpected \"sideways\""),
            absl::string_view::npos);
  EXPECT_FALSE(NamePattern::Parse("aten::").ok());
  EXPECT_FALSE(NamePattern::Parse("a b").ok());
  EXPECT_FALSE(NamePattern::Parse(std::string(300, 'x')).ok());
  EXPECT_TRUE(NamePattern::Parse("  gelu ").ok()) << "surrounding blanks are trimmed";
}

TEST(NameListTest, MsprobeListEntriesAreAlsoSubstrings) {
  const NameList list = *NameList::Parse({"conv", "linear.0.for"}, /*substrings=*/true);
  EXPECT_TRUE(list.Matches(Forward("aten::conv2d", 0)));
  EXPECT_TRUE(list.Matches(Forward("aten::linear", 0)))
      << "msprobe name Functional.linear.0.forward";
  EXPECT_FALSE(list.Matches(Forward("aten::linear", 1)));
  EXPECT_FALSE(list.Matches(Forward("aten::gelu", 0)));
  EXPECT_FALSE(NameList::Parse({"linear.0.for"}, /*substrings=*/false).ok());
}

TEST(NameListTest, UnknownNamesNameTheClosestInTheFormWritten) {
  const OpNameIndex known(
      {"aten::linear", "aten::bilinear", "aten::gelu", "aten::matmul", "npu::npu_rms_norm"});
  const NameList list = *NameList::Parse(
      {"Functional.lienar", "aten::gleu", "matmul", "npu_rms_nrom", "Tensor.add_"});
  const std::vector<std::string> lines = list.Unknown(known);
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0],
            "\"Functional.lienar\" selects no operator this process knows; closest: "
            "Functional.linear");
  EXPECT_EQ(lines[1], "\"aten::gleu\" selects no operator this process knows; closest: aten::gelu");
  EXPECT_EQ(lines[2],
            "\"npu_rms_nrom\" selects no operator this process knows; closest: npu_rms_norm");
  EXPECT_EQ(lines[3], "\"Tensor.add_\" selects no operator this process knows");
}

TEST(MsprobeNameTest, CallsGetMsprobesNames) {
  EXPECT_EQ(MsprobeName(Forward("aten::linear", 2)), "Functional.linear.2.forward");
  EXPECT_EQ(MsprobeName(Backward("aten::mm", "aten::linear", 2)), "Functional.linear.2.backward");
  EXPECT_EQ(MsprobeName(Forward("aten::cross_entropy_loss", 0)),
            "Functional.cross_entropy.0.forward");
  EXPECT_EQ(MsprobeName(Forward("aten::matmul", 1)), "Torch.matmul.1.forward");
  EXPECT_EQ(MsprobeName(Forward("aten::add_", 0, "Tensor")), "Tensor.add_.0.forward");
  EXPECT_EQ(MsprobeName(Forward("aten::_foreach_add_", 0, "List")),
            "Aten._foreach_add_.List.0.forward");
  EXPECT_EQ(MsprobeName(Forward("aten::_softmax", 0)), "Aten._softmax.default.0.forward");
  EXPECT_EQ(MsprobeName(Forward("npu::npu_rms_norm", 3)), "NPU.npu_rms_norm.3.forward");
  EXPECT_EQ(MsprobeName(Forward("c10d::allreduce_", 0)), "Distributed.all_reduce.0.forward");
  EXPECT_EQ(MsprobeName(Forward("custom::op", 0)), "");
  v1::ApiCall accumulate = Forward("aten::add_", 4, "Tensor");
  accumulate.set_phase(v1::PHASE_BACKWARD);  // gradient accumulation: no forward call
  EXPECT_EQ(MsprobeName(accumulate), "");
}

// Every call has a CSV name msprobe's readers split into Type, API and index (3 segments, 4 for
// msprobe's own Aten names with an overload), so a details row "{name}.forward.output.0" has the
// 6 or 7 segments they require.
TEST(MsprobeNameTest, EveryCallHasACsvNameOfThreeOrFourSegments) {
  EXPECT_EQ(MsprobeCsvName(Forward("aten::linear", 2)), "Functional.linear.2");
  EXPECT_EQ(MsprobeCsvName(Backward("aten::mm", "aten::linear", 2)), "Functional.linear.2");
  EXPECT_EQ(MsprobeCsvName(Forward("npu::npu_rms_norm", 3)), "NPU.npu_rms_norm.3");
  EXPECT_EQ(MsprobeCsvName(Forward("aten::_softmax", 0)), "Aten._softmax.default.0");
  v1::ApiCall accumulate = Forward("aten::add_", 4, "Tensor");
  accumulate.set_phase(v1::PHASE_BACKWARD);  // gradient accumulation: msprobe's online Aten name
  EXPECT_EQ(MsprobeCsvName(accumulate), "Aten.add_.4");
  EXPECT_EQ(MsprobeCsvName(Forward("custom::op", 0)), "custom.op.0");
  for (const v1::ApiCall& call : {Forward("aten::linear", 2), Forward("aten::_softmax", 0),
                                  accumulate, Forward("custom::op", 0)}) {
    const std::vector<std::string> parts = absl::StrSplit(MsprobeCsvName(call), '.');
    EXPECT_TRUE(parts.size() == 3 || parts.size() == 4) << MsprobeCsvName(call);
  }
  // A name copied from a CSV into a filter selects its call.
  for (const v1::ApiCall& call :
       {Forward("aten::linear", 2), Backward("aten::mm", "aten::linear", 2),
        Forward("npu::npu_rms_norm", 3), Forward("aten::_softmax", 0), accumulate}) {
    const std::string name = MsprobeCsvName(call);
    EXPECT_TRUE(P(name).Matches(call)) << name;
  }
}

// A name msprobe prints parses back to a pattern selecting the call it names.
TEST(MsprobeNameTest, NamesRoundTrip) {
  const v1::ApiCall calls[] = {
      Forward("aten::linear", 2),         Forward("aten::matmul", 0),
      Forward("aten::add_", 1, "Tensor"), Forward("aten::_foreach_add_", 0, "List"),
      Forward("npu::npu_rms_norm", 3),    Backward("aten::mm", "aten::linear", 2)};
  for (const v1::ApiCall& call : calls) {
    const std::string name = MsprobeName(call);
    EXPECT_TRUE(P(name).Matches(call)) << name;
  }
}

}  // namespace
}  // namespace parity::common
