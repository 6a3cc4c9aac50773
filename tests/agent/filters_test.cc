// msprobe's filters and Parity's sampling budget.
#include "agent/filters.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

TEST(CallFilterTest, EmptyListsSelectEverything) {
  common::AgentConfig c;
  CallFilter f(c);
  EXPECT_TRUE(f.RankSelected(0));
  EXPECT_TRUE(f.RankSelected(7));
  EXPECT_TRUE(f.StepSelected(123));
  EXPECT_TRUE(f.OpSelected("aten::gelu"));
}

TEST(CallFilterTest, RankStepAndListFollowMsprobe) {
  common::AgentConfig c;
  c.rank = {0, 2};
  c.step = {1};
  c.list = {"conv", "gelu"};
  CallFilter f(c);
  EXPECT_TRUE(f.RankSelected(2));
  EXPECT_FALSE(f.RankSelected(1));
  EXPECT_TRUE(f.StepSelected(1));
  EXPECT_FALSE(f.StepSelected(0));
  EXPECT_TRUE(f.OpSelected("aten::gelu_backward"));  // substring, as msprobe's L1 list
  EXPECT_TRUE(f.OpSelected("aten::convolution"));
  EXPECT_FALSE(f.OpSelected("aten::add"));
}

TEST(CallFilterTest, BlackListWinsAndInPlaceFormsMatch) {
  common::AgentConfig c;
  c.parity.white_list = {"add", "mul"};
  c.parity.black_list = {"mul"};
  CallFilter f(c);
  EXPECT_TRUE(f.OpSelected("aten::add"));
  EXPECT_TRUE(f.OpSelected("aten::add_"));
  EXPECT_FALSE(f.OpSelected("aten::mul"));
  EXPECT_FALSE(f.OpSelected("aten::mul_"));
  EXPECT_FALSE(f.OpSelected("aten::gelu"));
}

TEST(ScopeFilterTest, SelectsFromFirstThroughLastCallPerStep) {
  ScopeFilter s({"aten::linear.1", "aten::gelu.1"});
  EXPECT_FALSE(s.Selected("aten::linear.0"));
  EXPECT_TRUE(s.Selected("aten::linear.1"));
  EXPECT_TRUE(s.Selected("aten::add.0"));
  EXPECT_TRUE(s.Selected("aten::gelu.1"));
  EXPECT_FALSE(s.Selected("aten::mm.0"));
  s.NewStep();
  EXPECT_FALSE(s.Selected("aten::add.0"));
  EXPECT_TRUE(s.Selected("aten::linear.1"));
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
