// The snapshot cache (agent/torch/snapshot_cache.h): a tensor whose every bit still equals its
// last snapshot gets that snapshot again, with no copy; any change, seen by the hook or not, makes
// a new one.
#include "agent/torch/snapshot_cache.h"

#include <gtest/gtest.h>

#include "agent/torch/snapshot.h"
#include "agent/torch/torch_values.h"
#include "tests/agent/agent_testing.h"

namespace parity::agent {
namespace {

using testing::Config;
using testing::RecordingServer;
using testing::StartAgent;
using testing::TrainStep;

// A snapshot the way the hook takes one, and whether it shares `earlier`'s memory.
at::Tensor Take(const at::Tensor& t) {
  TorchValues call;
  return Snapshot(c10::IValue(t), call).toTensor();
}
bool SameMemory(const at::Tensor& a, const at::Tensor& b) { return a.data_ptr() == b.data_ptr(); }

class SnapshotCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ConfigureSnapshotCache(uint64_t{64} << 20); }
  void TearDown() override { ConfigureSnapshotCache(uint64_t{128} << 20); }
};

TEST_F(SnapshotCacheTest, AnUnchangedTensorIsCopiedOnce) {
  const at::Tensor w = at::randn({256, 256});
  const SnapshotCacheStats before = GetSnapshotCacheStats();
  const at::Tensor first = Take(w);
  const at::Tensor second = Take(w);
  EXPECT_FALSE(SameMemory(first, w)) << "the first snapshot is a copy";
  EXPECT_TRUE(SameMemory(first, second)) << "the second call copied the weight again";
  EXPECT_TRUE(at::equal(second, w));
  const SnapshotCacheStats after = GetSnapshotCacheStats();
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_EQ(after.hit_bytes - before.hit_bytes, 256u * 256 * 4);
  EXPECT_EQ(after.compared_bytes - before.compared_bytes, 256u * 256 * 4);  // the proof
  // A view reads other elements (another offset, sizes or strides): its own snapshot.
  const at::Tensor row = Take(w.narrow(0, 1, 128));
  EXPECT_TRUE(at::equal(row, w.narrow(0, 1, 128)));
  EXPECT_TRUE(at::equal(Take(w.t()), w.t()));
}

TEST_F(SnapshotCacheTest, AnInPlaceUpdateMakesANewSnapshot) {
  at::Tensor w = at::randn({128, 128});
  const at::Tensor first = Take(w);
  w.add_(1.0);  // as an optimizer step does: the version counter moves
  const at::Tensor second = Take(w);
  EXPECT_FALSE(SameMemory(first, second));
  EXPECT_TRUE(at::equal(second, w));
  EXPECT_FALSE(at::equal(first, second)) << "the earlier snapshot kept its values";
  // Through a view of it, too (views share the version counter).
  w.narrow(0, 0, 1).mul_(2.0);
  EXPECT_TRUE(at::equal(Take(w), w));
}

TEST_F(SnapshotCacheTest, AWriteBehindTheVersionCounterIsSeenOnTheHost) {
  at::Tensor w = at::randn({128, 128});
  Take(w);
  // `.data` (Megatron's and apex's optimizers write parameters so): the same memory, a version
  // counter of its own, so w's does not move. The comparison finds it.
  w.data().mul_(0.5);
  EXPECT_TRUE(at::equal(Take(w), w));
}

TEST_F(SnapshotCacheTest, AWriteNoCounterOrSampleSeesIsSeen) {
  // A kernel that uses a tensor it should only read as scratch (a _foreach_add_ writing into its
  // `other` list) moves no version counter, and the hook forgets nothing: only comparing every
  // element finds it. Element 1 of 16384 is where the old 64-element sample (s * (n - 1) / 63)
  // never looked; the last element, where it did.
  for (const int64_t where : {int64_t{1}, int64_t{128 * 128 - 1}}) {
    at::Tensor w = at::randn({128, 128});
    const at::Tensor first = Take(w);
    const int64_t version = w._version();
    const uint64_t changed = GetSnapshotCacheStats().changed;
    w.data_ptr<float>()[where] += 1.0f;  // behind everything the agent is told
    ASSERT_EQ(w._version(), version);
    const at::Tensor second = Take(w);
    EXPECT_TRUE(at::equal(second, w)) << "element " << where << ": a stale snapshot";
    EXPECT_FALSE(SameMemory(first, second)) << where;
    EXPECT_EQ(GetSnapshotCacheStats().changed - changed, 1u) << where;
    // Of a transposed view too (compared through its strides).
    const at::Tensor t = w.t();
    Take(t);
    w.data_ptr<float>()[where] -= 2.0f;
    EXPECT_TRUE(at::equal(Take(t), t)) << "transposed, element " << where;
  }
}

// A transposed weight, as addmm reads it (weight.t()), is copied in its own layout, one memcpy,
// and proven unchanged with one memcmp; a bit changed anywhere behind the version counter, first
// and last element of its memory included, is still found.
TEST_F(SnapshotCacheTest, ATransposedWeightIsKeptInItsOwnLayoutAndStillProvenWhole) {
  at::Tensor w = at::randn({96, 128});  // 48 KiB: a pooled copy
  const at::Tensor t = w.t();
  const at::Tensor first = Take(t);
  EXPECT_EQ(first.strides(), t.strides()) << "made contiguous";
  EXPECT_TRUE(at::equal(first, t));
  EXPECT_FALSE(SameMemory(first, t));
  EXPECT_TRUE(SameMemory(first, Take(t))) << "not given again";
  for (const int64_t where : {int64_t{0}, int64_t{1}, int64_t{96 * 128 - 1}}) {
    const at::Tensor before = Take(t);
    w.data_ptr<float>()[where] += 1.0f;  // behind the version counter
    const at::Tensor after = Take(t);
    EXPECT_FALSE(SameMemory(before, after)) << "element " << where;
    EXPECT_TRUE(at::equal(after, t)) << "element " << where << ": a stale snapshot";
    EXPECT_FALSE(at::equal(before, t)) << where;
  }
  // A view that does not fill its memory (every other row) is copied row-major, as before.
  const at::Tensor rows = w.slice(0, 0, 96, 2);
  EXPECT_TRUE(Take(rows).is_contiguous());
}

TEST_F(SnapshotCacheTest, AFreedTensorsAddressTakenByAnotherIsNotItsSnapshot) {
  // Same size each time: the allocator gives the freed memory to the next tensor, at the same
  // address, with version 0 again, and the same sizes and strides. Only the storage's own
  // liveness tells them apart (the cache holds it weakly).
  int reused = 0;
  const void* previous = nullptr;
  for (int i = 0; i < 20; ++i) {
    at::Tensor t = at::full({64, 64}, static_cast<float>(i));
    reused += t.data_ptr() == previous;
    previous = t.data_ptr();
    EXPECT_TRUE(at::equal(Take(t), t)) << "iteration " << i;
  }
  EXPECT_GT(reused, 0) << "no address was given again: this test showed nothing";
}

// Activations of a step are freed after its backward; their snapshots can never be met again.
// The oldest such ones are let go as new ones are remembered (their buffers back to the pool),
// not held until the cap: a training's steady state holds its live tensors' snapshots, not the
// last 128 MiB of dead ones.
TEST_F(SnapshotCacheTest, SnapshotsOfFreedTensorsAreLetGoAsNewOnesComeIn) {
  ClearSnapshotCache();
  const uint64_t one = 64 * 64 * sizeof(float);
  const at::Tensor weight = at::randn({64, 64});
  at::Tensor kept = Take(weight);
  for (int step = 0; step < 50; ++step) {
    at::Tensor activation = at::full({64, 64}, static_cast<float>(step));
    EXPECT_TRUE(at::equal(Take(activation), activation));
    kept = Take(weight);  // the weight read every step: recently used, kept
  }
  // At most the weight, this step's activation and the two not yet let go.
  EXPECT_LE(GetSnapshotCacheStats().held_bytes, 4 * one);
  EXPECT_TRUE(SameMemory(kept, Take(weight))) << "the live weight's snapshot was let go";
  ClearSnapshotCache();
}

TEST_F(SnapshotCacheTest, AWriteTheHookSawForgetsEverySnapshotOfThatMemory) {
  // libtorch 1.13's _foreach_ ops write without moving the version counter; on a device no
  // element is sampled. The hook tells the cache which tensors a call wrote (its schema's
  // written arguments): every snapshot over that storage goes, through whichever view.
  const at::Tensor w = at::randn({128, 128});
  const at::Tensor first = Take(w);
  ASSERT_TRUE(SameMemory(first, Take(w)));
  const uint64_t forgotten = GetSnapshotCacheStats().forgotten;
  ForgetSnapshotsOf(w.narrow(0, 64, 64));
  EXPECT_EQ(GetSnapshotCacheStats().forgotten - forgotten, 1u);
  EXPECT_FALSE(SameMemory(first, Take(w)));
  ClearSnapshotCache();
  EXPECT_EQ(GetSnapshotCacheStats().held_bytes, 0u);
}

TEST_F(SnapshotCacheTest, OffKeepsNothing) {
  ConfigureSnapshotCache(0);
  const at::Tensor w = at::randn({256, 256});
  EXPECT_FALSE(SameMemory(Take(w), Take(w)));
}

TEST_F(SnapshotCacheTest, SmallTensorsAreCopiedEveryTime) {
  const at::Tensor b = at::randn({16});
  EXPECT_FALSE(SameMemory(Take(b), Take(b)));
}

// In a session: a weight read by the forward and the backward of a step is copied once, and sent
// once: the backward's call names it by the blob id of the forward's, its bytes not read again
// (parity_encode_limits.add_known); every call still gets its verdict.
TEST_F(SnapshotCacheTest, ASessionNamesASnapshotGivenAgainByItsBlob) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  const SnapshotCacheStats before = GetSnapshotCacheStats();
  torch::Tensor w = torch::randn({256, 512}, torch::requires_grad());
  for (int step = 0; step < 3; ++step) {
    TrainStep(w, torch::randn({64, 512}));
    agent->Step(nullptr);
  }
  ASSERT_TRUE(agent->Flush(60000));
  const Counters c = agent->GetCounters();
  agent->Close();
  const SnapshotCacheStats after = GetSnapshotCacheStats();
  EXPECT_GT(after.hits, before.hits);
  EXPECT_GT(after.blobs_named, before.blobs_named);
  EXPECT_GT(c.reused_bytes, 0u);
  EXPECT_EQ(c.verdicts, c.captured);
  EXPECT_EQ(c.pass, c.captured);
}

}  // namespace
}  // namespace parity::agent
