// A call's identity to and from its ApiCall (common/transport/call_wire.h): every field of
// ApiCall is either carried both ways or one of the payload fields the codec writes, so a field
// added to the proto and not to the identity fails here, naming it (issue 67: a call's identity
// was written out six times).
#include "common/transport/call_wire.h"
#include "parity/v1/parity.pb.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/naming/naming.h"
#include "tests/testing/fill_every_field.h"

namespace parity::common {
namespace {

using parity::testing::FillEveryField;
using parity::testing::PayloadFields;

TEST(CallWireTest, EveryFieldOfApiCallIsTheIdentitysOrThePayloads) {
  v1::ApiCall sent;
  std::set<std::string> filled;
  FillEveryField(&sent, "", &filled);
  ASSERT_GT(filled.size(), 20u);
  v1::ApiCall back;
  IdentityToWire(IdentityFromWire(sent), &back);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(sent, back))
      << "fields of ApiCall the identity does not carry both ways (add them to "
         "common/wire/call_identity.h and common/transport/call_wire.cc, or list them as "
         "payload):\n"
      << diff;
}

TEST(CallWireTest, TheToWireLeavesThePayloadAlone) {
  v1::ApiCall call;
  call.add_inputs()->set_int_value(7);
  call.add_kept_blob_ids(3);
  CallIdentity id;
  id.sequence = 5;
  id.phase = wire::kPhaseBackward;
  id.op_name = "aten::mm";
  IdentityToWire(std::move(id), &call);
  EXPECT_EQ(call.inputs_size(), 1);
  EXPECT_EQ(call.kept_blob_ids_size(), 1);
  EXPECT_EQ(call.sequence(), 5u);
  EXPECT_EQ(call.phase(), v1::PHASE_BACKWARD);
  EXPECT_FALSE(call.has_generator()) << "no generator state: none sent";
}

TEST(CallWireTest, AnIdentityNamesItselfAsItsMessageDoes) {
  v1::ApiCall call;
  call.set_op_name("aten::linear");
  call.set_call_index(3);
  call.set_phase(v1::PHASE_BACKWARD);
  call.set_forward_op_name("aten::linear");
  call.set_backward_index(1);
  call.set_api("Functional.linear");
  const CallIdentity id = IdentityFromWire(call);
  EXPECT_EQ(ApiName(CallNaming(id)), ApiName(CallNaming(call)));
  EXPECT_TRUE(id.backward());
}

}  // namespace
}  // namespace parity::common
