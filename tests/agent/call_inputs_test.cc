// A call's signature (agent/torch/call_inputs.h), what parity.max_checks_per_signature counts: the
// op, its overload, each tensor argument's dtype and shape, a scalar as "s"; written into a
// buffer the caller reuses, so a shorter signature after a longer one keeps nothing of it.
#include "agent/torch/call_inputs.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

c10::ArrayRef<const c10::IValue> Ref(const std::vector<c10::IValue>& v) {
  return c10::ArrayRef<const c10::IValue>(v.data(), v.size());
}

TEST(CallInputsTest, ASignatureNamesTheOpTheDtypesAndTheShapesAndReusesItsBuffer) {
  std::string s;
  const std::vector<c10::IValue> mm = {at::zeros({64, 32}), at::zeros({32, 16}, at::kBFloat16)};
  Signature("aten::mm", "", Ref(mm), &s);
  EXPECT_EQ(s, "aten::mm.|6:64,32,|15:32,16,");
  const std::vector<c10::IValue> add = {at::zeros({3}), c10::IValue(2.0),
                                        c10::IValue(at::Tensor())};
  Signature("aten::add", "Tensor", Ref(add), &s);
  EXPECT_EQ(s, "aten::add.Tensor|6:3,|s") << "nothing left of the longer one; undefined skipped";
  const std::vector<c10::IValue> other = {at::zeros({64, 33}), at::zeros({33, 16}, at::kBFloat16)};
  std::string t;
  Signature("aten::mm", "", Ref(other), &t);
  Signature("aten::mm", "", Ref(mm), &s);
  EXPECT_NE(s, t) << "another shape, another signature";
  const std::vector<c10::IValue> big = {at::empty({1 << 20, 0})};
  Signature("aten::sum", "", Ref(big), &s);
  EXPECT_EQ(s, "aten::sum.|6:1048576,0,");
}

}  // namespace
}  // namespace parity::agent
