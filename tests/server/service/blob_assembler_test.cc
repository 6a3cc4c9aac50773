// The stream's chunk reassembly and kept blobs alone (server/service/blob_assembler.h): the
// budgets it draws on and gives back. The same rules over gRPC: stream_contract_test.cc.
#include "server/service/blob_assembler.h"
#include "parity/v1/parity.pb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace parity::server {
namespace {

using ::testing::HasSubstr;

v1::TensorChunk Chunk(uint64_t id, uint64_t offset, const std::string& data, uint64_t total,
                      bool keep = false) {
  v1::TensorChunk c;
  c.set_blob_id(id);
  c.set_offset(offset);
  c.set_data(data);
  c.set_total_bytes(total);
  c.set_keep(keep);
  return c;
}

common::DecodeLimits Limits() {
  common::DecodeLimits l;
  l.max_tensor_bytes = 1000;
  l.max_call_bytes = 2000;
  return l;
}

TEST(ByteBudgetTest, TakesWithinTheCapAndSaysWhatAnOverdraftWouldHold) {
  ByteBudget b(100);
  EXPECT_EQ(b.TryTake(60), 0u);
  EXPECT_EQ(b.TryTake(50), 110u);  // refused: nothing taken
  EXPECT_EQ(b.used(), 60u);
  EXPECT_EQ(b.TakeUpTo(70), 40u);  // what is left
  EXPECT_EQ(b.TakeUpTo(1), 0u);
  b.Give(100);
  EXPECT_EQ(b.used(), 0u);
}

TEST(BlobAssemblerTest, ACallTakesItsCompleteBlobsAndGivesTheirBytesBack) {
  ByteBudget partial(1 << 20), kept(1 << 20);
  BlobAssembler a(Limits(), &partial, &kept);
  ASSERT_TRUE(a.OnChunk(Chunk(7, 0, "abc", 5)).ok());
  EXPECT_EQ(partial.used(), 3u);
  auto early = a.TakeForCall(1, {});
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.status().message(), HasSubstr("3 of its 5 bytes arrived before call 1"));
  ASSERT_TRUE(a.OnChunk(Chunk(7, 3, "de", 5)).ok());
  auto store = a.TakeForCall(2, {});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NE((*store)->FindBlob(7), nullptr);
  EXPECT_EQ(*(*store)->FindBlob(7), "abcde");
  EXPECT_EQ(partial.used(), 0u);  // the work queue counts them now
  a.Close();
}

TEST(BlobAssemblerTest, ChunksOutOfOrderOrOverTheBudgetAreRefused) {
  ByteBudget partial(4), kept(0);
  BlobAssembler a(Limits(), &partial, &kept);
  EXPECT_THAT(a.OnChunk(Chunk(1, 2, "x", 3)).message(), HasSubstr("expected 0"));
  EXPECT_THAT(a.OnChunk(Chunk(2, 0, "x", 1001)).message(), HasSubstr("max_tensor_bytes 1000"));
  EXPECT_THAT(a.OnChunk(Chunk(3, 0, "hello", 5)).message(),
              HasSubstr("over parity.max_partial_blob_bytes 4"));
  EXPECT_EQ(partial.used(), 0u);
  ASSERT_TRUE(a.OnChunk(Chunk(4, 0, "abc", 9)).ok());
  a.Close();  // a stream ending with blobs of no call gives their bytes back
  EXPECT_EQ(partial.used(), 0u);
}

TEST(BlobAssemblerTest, KeptBlobsServeLaterCallsUntilReleased) {
  ByteBudget partial(1 << 20), kept(10);
  BlobAssembler a(Limits(), &partial, &kept);
  EXPECT_EQ(a.OfferKept(8), 8u);
  BlobAssembler other(Limits(), &partial, &kept);
  EXPECT_EQ(other.OfferKept(8), 2u);  // what the server-wide total leaves
  ASSERT_TRUE(a.OnChunk(Chunk(5, 0, "kept!", 5, /*keep=*/true)).ok());
  ASSERT_TRUE(a.TakeForCall(1, {}).ok());
  auto later = a.TakeForCall(2, {5});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(*(*later)->FindBlob(5), "kept!");
  EXPECT_THAT(a.OnChunk(Chunk(5, 0, "new", 3)).message(), HasSubstr("keeps a blob of that id"));
  EXPECT_THAT(a.OnChunk(Chunk(6, 0, "four", 4, /*keep=*/true)).message(),
              HasSubstr("would hold 9 bytes of kept blobs on this stream, over "
                        "ServerInfo.kept_blob_bytes 8"));
  v1::BlobRelease release;
  release.add_blob_ids(5);
  ASSERT_TRUE(a.OnRelease(release).ok());
  EXPECT_THAT(a.OnRelease(release).message(), HasSubstr("does not keep"));
  EXPECT_THAT(a.TakeForCall(3, {5}).status().message(), HasSubstr("kept_blob_ids names blob 5"));
  EXPECT_EQ((*later)->FindBlob(5)->size(), 5u);  // the call still holds its share
  a.Close();
  other.Close();
  EXPECT_EQ(kept.used(), 0u);
}

}  // namespace
}  // namespace parity::server
