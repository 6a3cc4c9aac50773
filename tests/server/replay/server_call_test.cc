// The server's call record (server/replay/server_call.h): the names it makes once are the ones
// common/naming would make, and an operator's traits are resolved once and shared, within a
// bound that made-up names cannot push past.
#include "server/replay/server_call.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/naming/api_names.h"
#include "common/naming/naming.h"

namespace parity::server {
namespace {

v1::ApiCall Call(const std::string& op, const std::string& overload, v1::Phase phase) {
  v1::ApiCall c;
  c.set_op_name(op);
  c.set_overload(overload);
  c.set_call_index(3);
  c.set_phase(phase);
  return c;
}

void ExpectNamesOfCommon(const v1::ApiCall& wire) {
  const ServerCall call(wire);
  EXPECT_EQ(call.names.api, common::ApiName(wire));
  EXPECT_EQ(call.names.csv_api, common::MsprobeCsvName(wire));
  EXPECT_EQ(call.names.msprobe, common::MsprobeName(wire));
  EXPECT_EQ(call.DataName(), common::DataName(wire));
  EXPECT_EQ(call.names.forward_api,
            wire.forward_op_name().empty() ? "" : common::ForwardApiName(wire));
}

TEST(ServerCallTest, NamesAreCommonNamingsForEveryKindOfCall) {
  ExpectNamesOfCommon(Call("aten::linear", "", v1::PHASE_FORWARD));
  ExpectNamesOfCommon(Call("aten::add", "Tensor", v1::PHASE_FORWARD));
  ExpectNamesOfCommon(Call("npu::npu_rms_norm", "", v1::PHASE_FORWARD));
  ExpectNamesOfCommon(Call("mylib::op", "", v1::PHASE_FORWARD));  // no msprobe API
  ExpectNamesOfCommon(Call("aten::mm", "", v1::PHASE_BACKWARD));  // no forward call
  v1::ApiCall linked = Call("aten::mm", "", v1::PHASE_BACKWARD);  // a linked backward
  linked.set_forward_op_name("aten::linear");
  linked.set_backward_index(1);
  ExpectNamesOfCommon(linked);
  v1::ApiCall site = Call("aten::add", "Tensor", v1::PHASE_FORWARD);  // named at its call site
  site.set_api("Tensor.add");
  site.set_api_index(7);
  ExpectNamesOfCommon(site);
}

TEST(ServerCallTest, MsprobeApiIsTheApiPartOfTheMsprobeName) {
  const v1::ApiCall forward = Call("aten::linear", "", v1::PHASE_FORWARD);
  EXPECT_EQ(ServerCall(forward).names.msprobe_api, "Functional.linear");
  EXPECT_EQ(ServerCall(forward).names.msprobe, "Functional.linear.3.forward");
  v1::ApiCall linked = Call("aten::mm", "", v1::PHASE_BACKWARD);
  linked.set_forward_op_name("aten::linear");
  EXPECT_EQ(ServerCall(linked).names.msprobe_api, "Functional.linear");
  const v1::ApiCall unmapped = Call("mylib::op", "", v1::PHASE_FORWARD);
  EXPECT_EQ(ServerCall(unmapped).names.msprobe, "");
  EXPECT_EQ(ServerCall(unmapped).names.msprobe_api, "");
}

TEST(ServerCallTest, OperatorTraitsAreResolvedOnceAndShared) {
  const v1::ApiCall a = Call("aten::dropout", "", v1::PHASE_FORWARD);
  const v1::ApiCall b = Call("aten::dropout", "", v1::PHASE_BACKWARD);
  const ServerCall first(a), second(b);
  EXPECT_EQ(first.op.get(), second.op.get());
  EXPECT_EQ(first.op->random_family, common::RandomFamily::kDropout);
  EXPECT_EQ(first.op->bare(), "dropout");
  EXPECT_TRUE(first.op->skip_reason.empty());
  const v1::ApiCall empty = Call("aten::empty", "memory_format", v1::PHASE_FORWARD);
  EXPECT_FALSE(ServerCall(empty).op->skip_reason.empty());
  EXPECT_EQ(ServerCall(empty).op->random_family, common::RandomFamily::kNone);
}

TEST(ServerCallTest, MadeUpOperatorNamesDoNotGrowTheCacheWithoutBound) {
  const v1::ApiCall known = Call("aten::gelu", "", v1::PHASE_FORWARD);
  const std::shared_ptr<const OperatorTraits> cached = ServerCall(known).op;
  for (int i = 0; i < 5000; ++i) {
    (void)OperatorTraitsOf(absl::StrCat("junk::op_", i));
  }
  // Past the bound a name is resolved per call, still right, and not kept.
  const std::shared_ptr<const OperatorTraits> late = OperatorTraitsOf("junk::bernoulli");
  EXPECT_NE(late.get(), OperatorTraitsOf("junk::bernoulli").get());
  EXPECT_EQ(late->random_family, common::RandomFamily::kBernoulli);
  // What was cached before stays shared.
  EXPECT_EQ(ServerCall(known).op.get(), cached.get());
}

}  // namespace
}  // namespace parity::server
