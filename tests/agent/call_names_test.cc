// A call's names within its step (agent/transport/call_names.h): call indices per op that start
// afresh each step, and the links from a backward call's autograd node to its forward call, whose
// records are reused from step to step (their map nodes and buffers): a reused link carries the
// new call's every field, and a link of a step gone is never found.
#include "agent/transport/call_names.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

TEST(CallNamesTest, IndicesAndLinksStartAfreshEachStepThroughReusedRecords) {
  CallNames names;
  EXPECT_EQ(names.NextCallIndex("aten::mm"), 0u);
  EXPECT_EQ(names.NextCallIndex("aten::mm"), 1u);
  EXPECT_EQ(names.NextCallIndex("Functional.linear"), 0u);
  names.RecordForward(10,
                      {"aten::mm", "", 1, "model.layers.0.mlp.gate_proj", "Functional.linear", 0});
  names.RecordForward(12, {"aten::silu", "", 0, "model.layers.0.mlp", "", 0});
  CallNames::Forward f;
  ASSERT_TRUE(names.LinkBackward(11, &f));  // node 11 was made by the call at 10
  EXPECT_EQ(f.op, "aten::mm");
  EXPECT_EQ(f.module, "model.layers.0.mlp.gate_proj");
  EXPECT_EQ(f.api, "Functional.linear");
  EXPECT_EQ(f.backward_calls, 0u);
  ASSERT_TRUE(names.LinkBackward(10, &f));
  EXPECT_EQ(f.backward_calls, 1u) << "the second backward call linked to it";
  EXPECT_FALSE(names.LinkBackward(9, &f));

  names.NewStep();  // the records go to the spares
  EXPECT_FALSE(names.LinkBackward(11, &f)) << "a link of the step gone";
  EXPECT_EQ(names.NextCallIndex("aten::mm"), 0u);
  EXPECT_EQ(names.NextCallIndex("Functional.linear"), 0u);
  names.RecordForward(20, {"aten::add", "Tensor", 3, "model.norm", "", 0});
  ASSERT_TRUE(names.LinkBackward(25, &f));
  EXPECT_EQ(f.op, "aten::add");
  EXPECT_EQ(f.overload, "Tensor");
  EXPECT_EQ(f.call_index, 3u);
  EXPECT_EQ(f.module, "model.norm");
  EXPECT_EQ(f.api, "") << "a reused record keeps nothing of its last call";
  EXPECT_EQ(f.backward_calls, 0u);
  // A second forward call at one sequence number owns it from then on, counted afresh.
  names.RecordForward(20, {"aten::mul", "Tensor", 0, "model.norm", "Tensor.mul", 2});
  ASSERT_TRUE(names.LinkBackward(20, &f));
  EXPECT_EQ(f.op, "aten::mul");
  EXPECT_EQ(f.api, "Tensor.mul");
  EXPECT_EQ(f.api_index, 2u);
  EXPECT_EQ(f.backward_calls, 0u);
}

}  // namespace
}  // namespace parity::agent
