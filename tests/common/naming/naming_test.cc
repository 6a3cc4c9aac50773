// One naming scheme for every display name (common/naming/naming.h, docs/results.md).
#include "common/naming/naming.h"
#include "parity/v1/parity.pb.h"

#include <regex>

#include "gtest/gtest.h"

namespace parity::common {
namespace {

v1::ApiCall Call(const char* op, const char* overload, uint64_t index, v1::Phase phase) {
  v1::ApiCall c;
  c.set_op_name(op);
  c.set_overload(overload);
  c.set_call_index(index);
  c.set_phase(phase);
  return c;
}

TEST(NamingTest, ForwardCallsKeepMsprobesNames) {
  const v1::ApiCall c = Call("aten::add", "Tensor", 3, v1::PHASE_FORWARD);
  EXPECT_EQ(ApiName(c), "aten::add.Tensor.3");
  EXPECT_EQ(OutputName(c, 1), "aten::add.Tensor.3.forward.output.1");
  EXPECT_EQ(ForwardApiName(c), "aten::add.Tensor.3");
  EXPECT_EQ(LogName(c), "aten::add.Tensor.3 forward");
  EXPECT_EQ(ApiName(Call("aten::gelu", "", 0, v1::PHASE_FORWARD)), "aten::gelu.0");
}

TEST(NamingTest, BackwardCallsPairWithTheirForwardCallAndAreUnique) {
  v1::ApiCall mm = Call("aten::mm", "", 1, v1::PHASE_BACKWARD);
  mm.set_forward_op_name("aten::linear");
  mm.set_backward_index(2);
  EXPECT_EQ(ApiName(mm), "aten::linear.1.backward.2");
  EXPECT_EQ(OutputName(mm, 0), "aten::linear.1.backward.2.output.0");
  EXPECT_EQ(ForwardApiName(mm), "aten::linear.1");
  EXPECT_EQ(LogName(mm), "aten::linear.1.backward.2 (aten::mm)");
  v1::ApiCall softmax = Call("aten::_softmax_backward_data", "", 0, v1::PHASE_BACKWARD);
  softmax.set_forward_op_name("aten::softmax");
  softmax.set_forward_overload("int");
  EXPECT_EQ(ApiName(softmax), "aten::softmax.int.0.backward.0");
  // A backward call with no forward call keeps its own name.
  const v1::ApiCall detach = Call("aten::detach", "", 4, v1::PHASE_BACKWARD);
  EXPECT_EQ(ApiName(detach), "aten::detach.4");
  EXPECT_EQ(OutputName(detach, 0), "aten::detach.4.backward.output.0");
}

// The row-name regex docs/results.md gives parses every form.
TEST(NamingTest, TheDocumentedRegexParsesEveryRowName) {
  const std::regex row(R"(^(.*)\.(forward|backward)(?:\.(\d+))?\.output\.(\d+)$)");
  v1::ApiCall linked = Call("aten::mm", "", 1, v1::PHASE_BACKWARD);
  linked.set_forward_op_name("aten::linear");
  linked.set_backward_index(2);
  const std::pair<v1::ApiCall, std::string> cases[] = {
      {Call("aten::add", "Tensor", 3, v1::PHASE_FORWARD), "aten::add.Tensor.3"},
      {linked, "aten::linear.1"},
      {Call("aten::detach", "", 4, v1::PHASE_BACKWARD), "aten::detach.4"},
  };
  for (const auto& [call, api] : cases) {
    std::smatch m;
    const std::string name = OutputName(call, 7);
    ASSERT_TRUE(std::regex_match(name, m, row)) << name;
    EXPECT_EQ(m[1], api);
    EXPECT_EQ(m[4], "7");
  }
}

TEST(NamingTest, BareNamesDropTheNamespace) {
  EXPECT_EQ(BareOpName("aten::mul_"), "mul_");
  EXPECT_EQ(BareOpName("npu::npu_rms_norm"), "npu_rms_norm");
  EXPECT_EQ(BareOpName("gelu"), "gelu");
}

}  // namespace
}  // namespace parity::common
