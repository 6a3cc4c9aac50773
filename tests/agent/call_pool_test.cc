// The pool of call records (agent/transport/call_pool.h): a record given back is taken again,
// cleared to a fresh record's every field (checked through the wire, so a field added to the
// call's identity and not reset fails here), its values released, its string buffers kept; the
// pool holds at most its capacity.
#include "agent/transport/call_pool.h"

#include <google/protobuf/util/message_differencer.h>

#include "common/transport/call_wire.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"
#include "tests/testing/fill_every_field.h"

namespace parity::agent {
namespace {

v1::ApiCall Wire(CallRecord record) {
  v1::ApiCall out;
  common::IdentityToWire(std::move(record), &out);
  return out;
}

TEST(CallPoolTest, AGivenRecordIsTakenAgainClearedWithItsBuffersKept) {
  CallPool pool;
  std::unique_ptr<CapturedCall> call = pool.Take();
  EXPECT_EQ(pool.reused(), 0u);
  v1::ApiCall filled;
  std::set<std::string> names;
  parity::testing::FillEveryField(&filled, "", &names);
  call->meta = common::IdentityFromWire(filled);
  call->meta.module_path = std::string(200, 'm');  // past any short-string buffer
  int released = 0;
  parity_values v{};
  v.size = sizeof(v);
  v.bytes = 4096;
  v.ctx = &released;
  v.release = [](void* ctx) { ++*static_cast<int*>(ctx); };
  call->SetValues(v);
  call->watch_generator = true;
  const CapturedCall* address = call.get();
  const char* module_buffer = call->meta.module_path.data();

  pool.Give(std::move(call));
  EXPECT_EQ(released, 1) << "its values released when given back";
  EXPECT_EQ(pool.size(), 1u);
  std::unique_ptr<CapturedCall> again = pool.Take();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(pool.reused(), 1u);
  google::protobuf::util::MessageDifferencer differ;
  std::string diff;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(Wire(again->meta), Wire(CallRecord{})))
      << "fields a recycled record keeps (CapturedCall::Clear):\n"
      << diff;
  EXPECT_FALSE(again->has_values);
  EXPECT_EQ(again->bytes, 0u);
  EXPECT_FALSE(again->watch_generator);
  EXPECT_EQ(again->session, nullptr);
  EXPECT_TRUE(again->meta.module_path.empty());
  EXPECT_GE(again->meta.module_path.capacity(), 200u);
  EXPECT_EQ(again->meta.module_path.data(), module_buffer) << "the buffer is kept";
  again.reset();
  EXPECT_EQ(released, 1) << "released once";
}

TEST(CallPoolTest, AtMostItsCapacityWaitsAndNullIsIgnored) {
  CallPool pool(2);
  std::vector<std::unique_ptr<CapturedCall>> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(pool.Take());
  for (auto& c : calls) pool.Give(std::move(c));
  EXPECT_EQ(pool.size(), 2u);
  pool.Give(nullptr);
  EXPECT_EQ(pool.size(), 2u);
  pool.set_capacity(0);
  EXPECT_EQ(pool.size(), 0u);
  pool.Give(pool.Take());
  EXPECT_EQ(pool.size(), 0u) << "capacity 0: every record freed";
}

}  // namespace
}  // namespace parity::agent
