// Fills every singular field of an ApiCall (or any message) with a value of its own: the tests
// that must fail when a field is added to the wire and not to the code that carries it
// (CallWireTest; CallPoolTest, a recycled record's every field reset).
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace parity::testing {

// The values and what the agent's encoder writes with them: not the identity's.
inline const std::set<std::string>& PayloadFields() {
  static const std::set<std::string> kPayload = {"inputs", "outputs", "kept_blob_ids",
                                                 "inputs_written", "unchecked_writes"};
  return kPayload;
}

// Sets every singular field of `m` to a value of its own (numbers by field number, strings by
// name, enums to their last value, messages recursively); returns the names it set.
inline void FillEveryField(google::protobuf::Message* m, const std::string& prefix,
                           std::set<std::string>* filled) {
  const google::protobuf::Descriptor* d = m->GetDescriptor();
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (prefix.empty() && PayloadFields().count(f->name()) != 0) continue;
    ASSERT_FALSE(f->is_repeated()) << prefix << f->name() << ": a repeated field of a call's "
                                   << "identity: carry it in CallIdentity or list it as payload";
    const int n = f->number() + 2;
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(m, f, n);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(m, f, -1000 * n);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(m, f, n);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(m, f, 1000 * n);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(m, f, true);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        r->SetString(m, f, prefix + f->name());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM: {
        const google::protobuf::EnumDescriptor* e = f->enum_type();
        r->SetEnum(m, f, e->value(e->value_count() - 1));
        break;
      }
      case google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE:
        FillEveryField(r->MutableMessage(m, f), prefix + f->name() + ".", filled);
        break;
      default:
        FAIL() << prefix << f->name() << ": a field of a type this test does not fill";
    }
    filled->insert(prefix + f->name());
  }
}

}  // namespace parity::testing
