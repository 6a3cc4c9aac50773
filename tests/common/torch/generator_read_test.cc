// GeneratorEntry, the agent's watch of a call's generator (parity.detect_random): a draw of any
// kind is seen at exit, a change anywhere in the state too (not only where a cheap mark would
// look), and the state sent is libtorch's own bytes of the state at entry.
#include <ATen/CPUGeneratorImpl.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/torch/generator_read.h"
#include "common/torch/torch_pch.h"
#include "gtest/gtest.h"

namespace parity::common {
namespace {

at::Generator Seeded(uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return gen;
}

TEST(GeneratorEntryTest, NoDrawIsNotAMoveAndEveryKindOfDrawIs) {
  at::Generator gen = Seeded(7);
  GeneratorEntry entry;
  entry.Take(gen);
  EXPECT_FALSE(entry.Moved(gen));
  at::add(at::ones({4}), at::ones({4}));  // draws from nothing
  EXPECT_FALSE(entry.Moved(gen));
  const std::vector<std::function<void()>> draws = {
      [&] { at::rand({3}, gen); },
      [&] { at::randn({1}, gen); },  // one normal sample: may leave the second one cached
      [&] { at::randperm(5, gen); },
      [&] { at::empty({8}).bernoulli_(0.5, gen); },
  };
  for (std::size_t i = 0; i < draws.size(); ++i) {
    entry.Take(gen);
    draws[i]();
    EXPECT_TRUE(entry.Moved(gen)) << "draw " << i;
  }
}

// A change where the former mark (the twister's position and its first word) did not look: one
// word deep in the state, and the cached normal sample alone.
TEST(GeneratorEntryTest, AChangeAnywhereInTheStateIsAMove) {
  at::Generator gen = Seeded(11);
  auto* impl = gen.get<at::CPUGeneratorImpl>();
  GeneratorEntry entry;
  entry.Take(gen);
  at::mt19937 engine = impl->engine();
  at::mt19937_data_pod data = engine.data();
  data.state_[400] ^= 1u;
  engine.set_data(data);
  impl->set_engine(engine);
  EXPECT_TRUE(entry.Moved(gen));

  entry.Take(gen);
  impl->set_next_double_normal_sample(0.25);
  EXPECT_TRUE(entry.Moved(gen));
  entry.Take(gen);
  impl->set_next_double_normal_sample(-0.25);
  EXPECT_TRUE(entry.Moved(gen));
  entry.Take(gen);
  impl->set_next_float_normal_sample(1.0f);
  EXPECT_TRUE(entry.Moved(gen));
}

TEST(GeneratorEntryTest, TheStateSentIsLibtorchsOwnBytesAtEntry) {
  at::Generator gen = Seeded(3);
  at::randn({3}, gen);  // leaves a cached normal sample in some libtorch versions
  const std::string before = GeneratorStateBytes(gen);
  GeneratorEntry entry;
  entry.Take(gen);
  at::rand({100}, gen);
  ASSERT_NE(GeneratorStateBytes(gen), before);
  EXPECT_EQ(entry.StateBytes(), before);
  // Replayed from those bytes, a generator draws what the call drew.
  at::Generator replay = Seeded(0);
  {
    std::lock_guard<std::mutex> lock(replay.mutex());
    replay.set_state(at::from_blob(const_cast<char*>(entry.StateBytes().data()),
                                   {static_cast<int64_t>(before.size())}, at::kByte)
                         .clone());
  }
  at::Generator again = Seeded(0);
  {
    std::lock_guard<std::mutex> lock(again.mutex());
    again.set_state(at::from_blob(const_cast<char*>(before.data()),
                                  {static_cast<int64_t>(before.size())}, at::kByte)
                        .clone());
  }
  EXPECT_TRUE(at::equal(at::rand({16}, replay), at::rand({16}, again)));
}

}  // namespace
}  // namespace parity::common
