// msprobe's filters and Parity's sampling budget.
#include "agent/transport/filters.h"
#include "parity/v1/parity.pb.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

v1::ApiCall Call(const std::string& op, uint64_t index = 0, const std::string& overload = "") {
  v1::ApiCall c;
  c.set_op_name(op);
  c.set_overload(overload);
  c.set_call_index(index);
  c.set_phase(v1::PHASE_FORWARD);
  return c;
}

// A backward call `op` linked to forward call `index` of `forward_op`.
v1::ApiCall Backward(const std::string& op, const std::string& forward_op, uint64_t index) {
  v1::ApiCall c = Call(op, index);
  c.set_phase(v1::PHASE_BACKWARD);
  c.set_forward_op_name(forward_op);
  return c;
}

TEST(CallFilterTest, EmptyListsSelectEverything) {
  common::AgentConfig c;
  const CallFilter f = CallFilter::Of(c);
  EXPECT_TRUE(f.RankSelected(0));
  EXPECT_TRUE(f.RankSelected(7));
  EXPECT_TRUE(f.StepSelected(123));
  EXPECT_TRUE(f.CallSelected(Call("aten::gelu")));
}

TEST(CallFilterTest, RankStepAndListFollowMsprobe) {
  common::AgentConfig c;
  c.rank = {0, 2};
  c.step = {1};
  c.list = {"conv", "gelu"};
  const CallFilter f = CallFilter::Of(c);
  EXPECT_TRUE(f.RankSelected(2));
  EXPECT_FALSE(f.RankSelected(1));
  EXPECT_TRUE(f.StepSelected(1));
  EXPECT_FALSE(f.StepSelected(0));
  EXPECT_TRUE(f.CallSelected(Call("aten::gelu_backward")));  // substring, as msprobe's L1 list
  EXPECT_TRUE(f.CallSelected(Call("aten::convolution")));
  EXPECT_FALSE(f.CallSelected(Call("aten::add")));
}

TEST(CallFilterTest, BlackListWinsAndInPlaceFormsMatch) {
  common::AgentConfig c;
  c.parity.white_list = {"add", "mul"};
  c.parity.black_list = {"mul"};
  const CallFilter f = CallFilter::Of(c);
  EXPECT_TRUE(f.CallSelected(Call("aten::add")));
  EXPECT_TRUE(f.CallSelected(Call("aten::add_")));
  EXPECT_FALSE(f.CallSelected(Call("aten::mul")));
  EXPECT_FALSE(f.CallSelected(Call("aten::mul_")));
  EXPECT_FALSE(f.CallSelected(Call("aten::gelu")));
}

// The lists take msprobe's names and Parity's CSV names as well as bare ones; a name selects its
// calls' backward calls too.
TEST(CallFilterTest, ListsTakeMsprobeAndCsvNames) {
  common::AgentConfig c;
  c.parity.white_list = {"Functional.linear", "aten::add.Tensor", "cross_entropy"};
  c.parity.black_list = {"Tensor.add_"};
  const CallFilter f = CallFilter::Of(c);
  EXPECT_TRUE(f.CallSelected(Call("aten::linear", 3)));
  EXPECT_TRUE(f.CallSelected(Backward("aten::mm", "aten::linear", 3)));
  EXPECT_TRUE(f.CallSelected(Call("aten::add", 0, "Tensor")));
  EXPECT_FALSE(f.CallSelected(Call("aten::add", 0, "Scalar")));
  EXPECT_FALSE(f.CallSelected(Call("aten::add_", 0, "Tensor"))) << "black list wins";
  EXPECT_TRUE(f.CallSelected(Call("aten::cross_entropy_loss")));
  EXPECT_TRUE(f.CallSelected(Backward("aten::nll_loss_backward", "aten::cross_entropy_loss", 0)));
  EXPECT_FALSE(f.CallSelected(Call("aten::gelu")));
}

TEST(CallFilterTest, UnknownNamesAreReportedWithTheClosest) {
  common::AgentConfig c;
  c.parity.white_list = {"Functional.lienar", "gelu"};
  c.list = {"conv"};
  const CallFilter f = CallFilter::Of(c);
  const common::OpNameIndex known({"aten::linear", "aten::bilinear", "aten::gelu", "aten::conv2d"});
  const std::vector<std::string> lines = f.UnknownNames(known);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0],
            "parity.white_list: \"Functional.lienar\" selects no operator this process knows; "
            "closest: Functional.linear");
}

TEST(ScopeFilterTest, SelectsFromFirstThroughLastCallPerStep) {
  ScopeFilter s({"aten::linear.1", "aten::gelu.1"});
  EXPECT_FALSE(s.Selected(Call("aten::linear", 0)));
  EXPECT_TRUE(s.Selected(Call("aten::linear", 1)));
  EXPECT_TRUE(s.Selected(Call("aten::add", 0, "Tensor")));
  EXPECT_TRUE(s.Selected(Call("aten::gelu", 1)));
  EXPECT_FALSE(s.Selected(Call("aten::mm", 0)));
  s.NewStep();
  EXPECT_FALSE(s.Selected(Call("aten::add", 0, "Tensor")));
  EXPECT_TRUE(s.Selected(Call("aten::linear", 1)));
}

// Ends written as the CSVs print them (with an overload) or as msprobe names them.
TEST(ScopeFilterTest, EndsMayCarryOverloadsOrBeMsprobeNames) {
  ScopeFilter csv({"aten::add.Tensor.1", "aten::mul.Tensor.0"});
  EXPECT_FALSE(csv.Selected(Call("aten::add", 0, "Tensor")));
  EXPECT_TRUE(csv.Selected(Call("aten::add", 1, "Tensor")));
  EXPECT_TRUE(csv.Selected(Call("aten::mul", 0, "Tensor")));
  EXPECT_FALSE(csv.Selected(Call("aten::relu", 0)));

  ScopeFilter msprobe({"Functional.linear.1.forward", "Functional.gelu.0.forward"});
  EXPECT_FALSE(msprobe.Selected(Call("aten::linear", 0)));
  EXPECT_TRUE(msprobe.Selected(Call("aten::linear", 1)));
  EXPECT_TRUE(msprobe.Selected(Call("aten::gelu", 0)));
  EXPECT_FALSE(msprobe.Selected(Call("aten::linear", 2)));
}

TEST(SignatureBudgetTest, ChecksEachSignatureAtMostNTimesPerStep) {
  SignatureBudget b(2, /*per_step=*/true);
  EXPECT_TRUE(b.Take("gelu|f32[4,8]"));
  EXPECT_TRUE(b.Take("gelu|f32[4,8]"));
  EXPECT_FALSE(b.Take("gelu|f32[4,8]"));
  EXPECT_TRUE(b.Take("gelu|f32[4,9]"));  // another shape is another signature
  b.NewStep();
  EXPECT_TRUE(b.Take("gelu|f32[4,8]"));
}

TEST(SignatureBudgetTest, PerRunBudgetSurvivesStepsAndMemoryIsBounded) {
  SignatureBudget b(1, /*per_step=*/false, /*max_signatures=*/2);
  EXPECT_TRUE(b.Take("a"));
  b.NewStep();
  EXPECT_FALSE(b.Take("a"));
  EXPECT_TRUE(b.Take("b"));
  EXPECT_FALSE(b.Take("c"));  // over the signature cap: sampled out, not stored
  SignatureBudget unlimited(0, false);
  EXPECT_TRUE(unlimited.unlimited());
  EXPECT_TRUE(unlimited.Take("a"));
  EXPECT_TRUE(unlimited.Take("a"));
}

}  // namespace
}  // namespace parity::agent
