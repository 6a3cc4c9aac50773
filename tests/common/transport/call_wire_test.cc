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

namespace parity::common {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The values and what the agent's encoder writes with them: not the identity's.
const std::set<std::string>& PayloadFields() {
  static const std::set<std::string> kPayload = {"inputs", "outputs", "kept_blob_ids",
                                                 "inputs_written", "unchecked_writes"};
  return kPayload;
}

// Sets every singular field of `m` to a value of its own (numbers by field number, strings by
// name, enums to their last value, messages recursively); returns the names it set.
void FillEveryField(Message* m, const std::string& prefix, std::set<std::string>* filled) {
  const google::protobuf::Descriptor* d = m->GetDescriptor();
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (prefix.empty() && PayloadFields().count(f->name()) != 0) continue;
    ASSERT_FALSE(f->is_repeated()) << prefix << f->name() << ": a repeated field of a call's "
                                   << "identity: carry it in CallIdentity or list it as payload";
    const int n = f->number() + 2;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(m, f, n);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(m, f, -1000 * n);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(m, f, n);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(m, f, 1000 * n);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(m, f, true);
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(m, f, prefix + f->name());
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const google::protobuf::EnumDescriptor* e = f->enum_type();
        r->SetEnum(m, f, e->value(e->value_count() - 1));
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        FillEveryField(r->MutableMessage(m, f), prefix + f->name() + ".", filled);
        break;
      default:
        FAIL() << prefix << f->name() << ": a field of a type this test does not fill";
    }
    filled->insert(prefix + f->name());
  }
}

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
