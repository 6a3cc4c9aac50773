// The Check stream's byte layer: the method name, serialization that sends tensors from the
// message's memory (and keeps the message alive for as long as gRPC holds them), parsing.
#include "common/transport/wire.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {
namespace {

std::shared_ptr<v1::AgentMessage> CallWithTensor(std::size_t bytes) {
  auto m = std::make_shared<v1::AgentMessage>();
  v1::ApiCall* call = m->mutable_call();
  call->set_sequence(7);
  call->set_op_name("aten::add");
  call->set_overload("Tensor");
  v1::Tensor* t = call->add_inputs()->mutable_tensor();
  t->add_shape(static_cast<int64_t>(bytes / 4));
  std::string data(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 131 % 251);
  t->set_data(std::move(data));
  call->add_inputs()->set_int_value(3);
  return m;
}

std::vector<grpc::Slice> Slices(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  return slices;
}

bool SharesMemory(const grpc::ByteBuffer& b, const std::string& data) {
  for (const grpc::Slice& s : Slices(b)) {
    if (s.begin() == reinterpret_cast<const uint8_t*>(data.data()) && s.size() == data.size()) {
      return true;
    }
  }
  return false;
}

TEST(WireTest, CheckMethodNameIsTheServicesOwn) {
  const auto* service =
      v1::AgentMessage::descriptor()->file()->FindServiceByName("PrecisionChecker");
  ASSERT_NE(service, nullptr);
  const auto* method = service->FindMethodByName("Check");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(std::string(kCheckMethod), "/" + service->full_name() + "/" + method->name());
}

TEST(WireTest, SharedSerializationSendsTensorsFromTheMessageAndKeepsItAlive) {
  auto m = CallWithTensor(1 << 20);
  const std::string expected = m->SerializeAsString();
  const std::string& data = m->call().inputs(0).tensor().data();
  std::weak_ptr<v1::AgentMessage> alive = m;
  auto buffer = std::make_unique<grpc::ByteBuffer>(SerializeShared(std::move(m)));
  EXPECT_EQ(buffer->Length(), expected.size());
  EXPECT_TRUE(SharesMemory(*buffer, data));  // the tensor bytes were not copied
  ASSERT_FALSE(alive.expired());             // the buffer holds the message
  // Byte for byte what protobuf writes.
  std::string bytes;
  for (const grpc::Slice& s : Slices(*buffer)) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  EXPECT_EQ(bytes, expected);
  v1::AgentMessage back;
  ASSERT_TRUE(Parse(*buffer, &back));
  EXPECT_EQ(back.SerializeAsString(), expected);
  buffer.reset();
  EXPECT_TRUE(alive.expired());  // and lets it go with the last slice
}

// A MessageBatch made of serialized items: what protobuf writes for the same batch, byte for
// byte, with the items' tensor bytes still not copied; a batch of 1 item and of 300 (lengths
// needing two-byte varints) alike.
TEST(WireTest, BatchesAreTheirItemsWithoutCopies) {
  for (std::size_t count : {1, 3, 300}) {
    std::vector<std::shared_ptr<v1::AgentMessage>> messages;
    std::vector<grpc::ByteBuffer> items;
    v1::AgentMessage expected;
    for (std::size_t i = 0; i < count; ++i) {
      messages.push_back(CallWithTensor(i % 2 == 0 ? 40000 : 12));
      messages.back()->mutable_call()->set_sequence(i + 1);
      *expected.mutable_batch()->add_messages() = *messages.back();
      items.push_back(SerializeShared(messages.back()));
    }
    const grpc::ByteBuffer batch = SerializeBatch(kAgentBatchField, items);
    std::string bytes;
    for (const grpc::Slice& slice : Slices(batch)) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    EXPECT_EQ(bytes, expected.SerializeAsString()) << count;
    EXPECT_TRUE(SharesMemory(batch, messages.front()->call().inputs(0).tensor().data()));
    grpc::ByteBuffer copy = batch;
    v1::AgentMessage back;
    ASSERT_TRUE(Parse(copy, &back));
    EXPECT_EQ(back.batch().messages_size(), static_cast<int>(count));
  }
}

// The server's VerdictBatch the same way: verdicts serialized alone, then wrapped without a
// copy into what protobuf writes for a ServerMessage holding them all.
TEST(WireTest, VerdictBatchesAreTheirItems) {
  for (std::size_t count : {1, 2, 200}) {
    std::vector<grpc::ByteBuffer> items;
    v1::ServerMessage expected;
    for (std::size_t i = 0; i < count; ++i) {
      v1::ServerMessage one;
      one.mutable_verdict()->set_sequence(i + 1);
      one.mutable_verdict()->set_api_name(std::string(i % 7 * 30, 'a'));
      *expected.mutable_batch()->add_messages() = one;
      items.push_back(Serialize(one));
    }
    grpc::ByteBuffer batch = SerializeBatch(kServerBatchField, items);
    std::string bytes;
    for (const grpc::Slice& slice : Slices(batch)) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    EXPECT_EQ(bytes, expected.SerializeAsString()) << count;
    v1::ServerMessage back;
    ASSERT_TRUE(Parse(batch, &back));
    ASSERT_EQ(back.batch().messages_size(), static_cast<int>(count));
    EXPECT_EQ(back.batch().messages(static_cast<int>(count) - 1).verdict().sequence(), count);
  }
}

TEST(WireTest, SmallAndEmptyMessagesRoundTrip) {
  for (std::size_t n : {0, 1, 100, 8191, 8192, 20000}) {
    auto m = CallWithTensor(n);
    const std::string expected = m->SerializeAsString();
    grpc::ByteBuffer shared = SerializeShared(m);
    grpc::ByteBuffer copied = Serialize(*m);
    EXPECT_FALSE(SharesMemory(copied, m->call().inputs(0).tensor().data())) << n;
    for (grpc::ByteBuffer* b : {&shared, &copied}) {
      v1::AgentMessage back;
      ASSERT_TRUE(Parse(*b, &back)) << n;
      EXPECT_EQ(back.SerializeAsString(), expected) << n;
    }
  }
  grpc::ByteBuffer empty = Serialize(v1::AgentMessage());
  EXPECT_EQ(empty.Length(), 0u);
  v1::AgentMessage back;
  EXPECT_TRUE(Parse(empty, &back));
  EXPECT_EQ(back.kind_case(), v1::AgentMessage::KIND_NOT_SET);
}

TEST(WireTest, BytesThatAreNotTheMessageDoNotParse) {
  for (const std::string& bad : {std::string(7, '\xff'),
                                 std::string("\x12\x05\x62\x10"
                                             "abc",
                                             7),
                                 std::string("\x12")}) {
    grpc::Slice slice(bad);
    grpc::ByteBuffer b(&slice, 1);
    v1::AgentMessage m;
    EXPECT_FALSE(Parse(b, &m)) << testing::PrintToString(bad);
  }
}

}  // namespace
}  // namespace parity::common
