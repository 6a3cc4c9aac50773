// The server's call record (server/call/server_call.h): the names it makes once, written out
// for every kind of call, and an operator's traits are resolved once and shared, within a
// bound that made-up names cannot push past.
#include "server/call/server_call.h"
#include "parity/v1/parity.pb.h"

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

struct Names {
  std::string api, csv_api, msprobe, data, forward_api;
};

void ExpectNames(const v1::ApiCall& wire, const Names& want) {
  const ServerCall call(wire);
  EXPECT_EQ(call.names.api, want.api) << wire.ShortDebugString();
  EXPECT_EQ(call.names.csv_api, want.csv_api) << wire.ShortDebugString();
  EXPECT_EQ(call.names.msprobe, want.msprobe) << wire.ShortDebugString();
  EXPECT_EQ(call.DataName(), want.data) << wire.ShortDebugString();
  EXPECT_EQ(call.names.forward_api, want.forward_api) << wire.ShortDebugString();
}

// Each kind of call's names, written out (docs/results.md#names-in-the-csvs-msprobes).
TEST(ServerCallTest, NamesOfEveryKindOfCall) {
  ExpectNames(Call("aten::linear", "", v1::PHASE_FORWARD),
              {"aten::linear.3", "Functional.linear.3", "Functional.linear.3.forward",
               "aten::linear.3.forward", ""});
  ExpectNames(Call("aten::add", "Tensor", v1::PHASE_FORWARD),
              {"aten::add.Tensor.3", "Torch.add.3", "Torch.add.3.forward",
               "aten::add.Tensor.3.forward", ""});
  ExpectNames(Call("npu::npu_rms_norm", "", v1::PHASE_FORWARD),
              {"npu::npu_rms_norm.3", "NPU.npu_rms_norm.3", "NPU.npu_rms_norm.3.forward",
               "npu::npu_rms_norm.3.forward", ""});
  // No msprobe API: no msprobe name; the CSVs name it by namespace.
  ExpectNames(Call("mylib::op", "", v1::PHASE_FORWARD),
              {"mylib::op.3", "mylib.op.3", "", "mylib::op.3.forward", ""});
  // A backward call with no forward call: msprobe's online name for the engine's work.
  ExpectNames(Call("aten::mm", "", v1::PHASE_BACKWARD),
              {"aten::mm.3", "Aten.mm.3", "", "aten::mm.3.backward", ""});
  v1::ApiCall linked = Call("aten::mm", "", v1::PHASE_BACKWARD);  // a linked backward
  linked.set_forward_op_name("aten::linear");
  linked.set_backward_index(1);
  ExpectNames(linked,
              {"aten::linear.3.backward.1", "Functional.linear.3", "Functional.linear.3.backward",
               "aten::linear.3.backward.1", "aten::linear.3"});
  v1::ApiCall site = Call("aten::add", "Tensor", v1::PHASE_FORWARD);  // named at its call site
  site.set_api("Tensor.add");
  site.set_api_index(7);
  ExpectNames(site, {"aten::add.Tensor.3", "Tensor.add.7", "Tensor.add.7.forward",
                     "aten::add.Tensor.3.forward", ""});
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

// The identity is the call's own, copied at the edge: what the message says later (a worker
// swapping tensors out of it, say) changes nothing the results, the verdict or the metrics read.
TEST(ServerCallTest, TheIdentityIsDecodedOnceAndOwned) {
  v1::ApiCall wire = Call("aten::mm", "", v1::PHASE_BACKWARD);
  wire.set_sequence(41);
  wire.set_step(7);
  wire.set_forward_op_name("aten::linear");
  wire.set_backward_index(2);
  wire.set_autograd_node("MmBackward0");
  wire.set_module_path("layers.0.mlp");
  wire.set_in_optimizer(true);
  wire.set_autocast_dtype(v1::DTYPE_BFLOAT16);
  const ServerCall call(wire);
  wire.set_sequence(99);
  wire.set_op_name("aten::other");
  wire.clear_module_path();
  const CallIdentity& id = call.id;
  EXPECT_EQ(id.sequence, 41u);
  EXPECT_EQ(id.step, 7);
  EXPECT_TRUE(id.backward());
  EXPECT_EQ(id.op_name, "aten::mm");
  EXPECT_EQ(id.call_index, 3u);
  EXPECT_EQ(id.forward_op_name, "aten::linear");
  EXPECT_EQ(id.backward_index, 2u);
  EXPECT_EQ(id.autograd_node, "MmBackward0");
  EXPECT_EQ(id.module_path, "layers.0.mlp");
  EXPECT_TRUE(id.in_optimizer);
  EXPECT_EQ(id.autocast_dtype, wire::kBFloat16);
  EXPECT_EQ(call.DataName(), "aten::linear.3.backward.2");
}

// What the agent found of the call's writes is read once, here, and bounded as a verdict
// carries it: a client sending more notes, or longer ones, than the contract allows makes no
// larger a call record (kMaxUncheckedWrites notes of kMaxUncheckedWriteBytes).
TEST(ServerCallTest, TheAgentsWriteNotesAreReadOnceWithinTheirBounds) {
  v1::ApiCall wire = Call("aten::add_", "Tensor", v1::PHASE_FORWARD);
  wire.add_inputs()->set_int_value(1);
  wire.add_inputs()->set_int_value(2);
  for (int i = 0; i < 100; ++i) wire.add_unchecked_writes(std::string(5000, 'a' + i % 26));
  v1::InputWritten* w = wire.add_inputs_written();
  w->set_index(1);
  w->set_name("other");
  w->set_changed_elements(3);
  w->set_elements(8);
  const ServerCall call(wire);
  ASSERT_EQ(call.unchecked_writes.size(), kMaxUncheckedWrites);
  for (const std::string& note : call.unchecked_writes) {
    EXPECT_EQ(note.size(), kMaxUncheckedWriteBytes);
  }
  EXPECT_EQ(call.unchecked_writes[1], std::string(kMaxUncheckedWriteBytes, 'b'));
  ASSERT_EQ(call.inputs_written.size(), 1u);
  EXPECT_EQ(call.inputs_written[0].index, 1u);
  EXPECT_EQ(call.inputs_written[0].name, "other");
  EXPECT_EQ(call.inputs_written[0].changed_elements, 3u);
  EXPECT_EQ(call.inputs_written[0].elements, 8u);
  EXPECT_EQ(call.input_count, 2);
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
