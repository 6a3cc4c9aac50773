// Random operators through the CallChecker: this process plays the device, reading the generator
// state at each call's entry as the agent does. Replayed from that state they are bit-exact;
// judged by the random_property standard, planted faults are errors on the right metric and
// clean calls of every random op, dtype and size are not (a measured false-alarm count).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <chrono>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/torch/generator_state.h"
#include "common/torch/torch_pch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"
#include "server/call/verdict_encoder.h"
#include "server/compare/judge.h"
#include "server/random/random_property.h"
#include "server/replay/call_checker.h"
#include "tests/testing/op_cases.h"

namespace parity::server {
namespace {

using parity::server::RandomChecks;
using ::testing::HasSubstr;
using testing::Stack;

bool CudaPresent() { return at::hasCUDA() && at::getNumGPUs() > 0; }

std::unique_ptr<CallChecker> MakeChecker(const std::string& device, RandomChecks mode,
                                         double false_alarm = 1e-6) {
  parity::server::CheckerOptions options;
  options.bench_device = device;
  options.random_checks = mode;
  options.random_false_alarm = false_alarm;
  auto checker = CallChecker::Create(options, StandardsTable::Default());
  EXPECT_TRUE(checker.ok()) << checker.status();
  return *std::move(checker);
}

// A call of a random op as the agent sends it: the default generator of `device` read at entry,
// then the op run here (the device) and its values encoded.
v1::ApiCall RandomCall(const std::string& name, const std::string& overload, Stack args,
                       const std::function<void(Stack&)>& tamper = nullptr,
                       c10::Device device = c10::kCPU) {
  static uint64_t sequence = 0;
  absl::StatusOr<at::Generator> gen = common::DefaultGenerator(device);
  EXPECT_TRUE(gen.ok()) << gen.status();
  const v1::GeneratorState state = common::ReadGeneratorState(*gen);
  v1::ApiCall call =
      testing::BuildCall(name, overload, std::move(args), v1::PHASE_FORWARD, tamper, ++sequence);
  *call.mutable_generator() = state;
  return call;
}

v1::Verdict Check(const CallChecker& checker, const v1::ApiCall& call) {
  return ToVerdict(ServerCall(call), checker.Judge(call));
}

at::Tensor Randn(std::vector<int64_t> shape, at::ScalarType dtype = at::kFloat,
                 c10::Device device = c10::kCPU) {
  return at::randn(shape).to(dtype).to(device);
}

// The clean calls of every random op family, on `device` (tensors made there).
std::vector<std::pair<std::string, std::function<v1::ApiCall()>>> CleanRandomCalls(
    c10::Device device) {
  const auto opts = at::TensorOptions().device(device);
  auto on = [device](const at::Tensor& t) { return t.to(device); };
  std::vector<std::pair<std::string, std::function<v1::ApiCall()>>> calls = {
      {"dropout",
       [=] {
         return RandomCall("aten::dropout", "", {Randn({64, 256}, at::kFloat, device), 0.1, true},
                           nullptr, device);
       }},
      {"dropout bf16",
       [=] {
         return RandomCall("aten::dropout", "",
                           {Randn({64, 256}, at::kBFloat16, device), 0.2, true}, nullptr, device);
       }},
      {"native_dropout",
       [=] {
         return RandomCall("aten::native_dropout", "",
                           {Randn({128, 64}, at::kFloat, device), 0.3, true}, nullptr, device);
       }},
      {"feature_dropout",
       [=] {
         return RandomCall("aten::feature_dropout", "",
                           {Randn({8, 16, 10}, at::kFloat, device), 0.25, true}, nullptr, device);
       }},
      {"alpha_dropout",
       [=] {
         return RandomCall("aten::alpha_dropout", "",
                           {Randn({4096}, at::kFloat, device), 0.2, true}, nullptr, device);
       }},
      {"bernoulli",
       [=] {
         return RandomCall("aten::bernoulli", "", {on(at::rand({5000})), c10::IValue()}, nullptr,
                           device);
       }},
      {"bernoulli_.float",
       [=] {
         return RandomCall("aten::bernoulli_", "float",
                           {at::empty({3000}, opts), 0.3, c10::IValue()}, nullptr, device);
       }},
      {"rand",
       [=] {
         return RandomCall(
             "aten::rand", "",
             {std::vector<int64_t>{4096}, c10::IValue(), c10::IValue(), device, c10::IValue()},
             nullptr, device);
       }},
      {"randn",
       [=] {
         return RandomCall(
             "aten::randn", "",
             {std::vector<int64_t>{4096}, c10::IValue(), c10::IValue(), device, c10::IValue()},
             nullptr, device);
       }},
      {"uniform_",
       [=] {
         return RandomCall("aten::uniform_", "",
                           {at::empty({4096}, opts), -2.0, 3.0, c10::IValue()}, nullptr, device);
       }},
      {"normal_",
       [=] {
         return RandomCall("aten::normal_", "", {at::empty({4096}, opts), 1.0, 2.0, c10::IValue()},
                           nullptr, device);
       }},
      {"exponential_",
       [=] {
         return RandomCall("aten::exponential_", "", {at::empty({4096}, opts), 2.0, c10::IValue()},
                           nullptr, device);
       }},
      {"randint.low",
       [=] {
         return RandomCall(
             "aten::randint", "low",
             {3, 17, std::vector<int64_t>{4096}, at::kLong, c10::IValue(), device, c10::IValue()},
             nullptr, device);
       }},
      {"randperm",
       [=] {
         return RandomCall("aten::randperm", "",
                           {1000, at::kLong, c10::IValue(), device, c10::IValue()}, nullptr,
                           device);
       }},
      {"multinomial",
       [=] {
         return RandomCall("aten::multinomial", "",
                           {on(at::tensor({0.1, 0.2, 0.7})), 500, true, c10::IValue()}, nullptr,
                           device);
       }},
  };
  return calls;
}

class RandomReplayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !CudaPresent()) {
      GTEST_SKIP() << "no CUDA device in this libtorch: the CUDA draws need a GPU host";
    }
    device_ = GetParam() == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  c10::Device device_{c10::kCPU};
};

INSTANTIATE_TEST_SUITE_P(Draws, RandomReplayTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// CPU training -> CPU bench, CUDA training -> CUDA bench: replayed from the generator state read
// at entry, every random op's outputs equal the device's bit for bit.
TEST_P(RandomReplayTest, ReplayedFromTheGeneratorStateTheDrawsAreBitExact) {
  auto checker = MakeChecker(GetParam(), RandomChecks::kAuto);
  for (const auto& [what, make] : CleanRandomCalls(device_)) {
    SCOPED_TRACE(what);
    const v1::ApiCall call = make();
    EXPECT_EQ(call.generator().device_type(), device_.is_cuda() ? "cuda" : "cpu");
    EXPECT_EQ(call.generator().device(),
              device_.is_cuda() ? v1::GENERATOR_DEVICE_CUDA : v1::GENERATOR_DEVICE_CPU);
    const v1::Verdict v = Check(*checker, call);
    EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
    for (const v1::OutputVerdict& o : v.outputs()) {
      EXPECT_EQ(o.standard(), "binary") << o.ShortDebugString();
      EXPECT_EQ(o.metrics().at("mismatch_rate"), 0) << o.ShortDebugString();
      EXPECT_THAT(o.message(), HasSubstr("replayed from the training's"));
    }
  }
}

// One changed draw is an error when the draws are replayed.
TEST_P(RandomReplayTest, ReplayedDrawsCatchASingleChangedElement) {
  auto checker = MakeChecker(GetParam(), RandomChecks::kAuto);
  const v1::Verdict v =
      Check(*checker, RandomCall(
                          "aten::dropout", "", {Randn({64, 256}, at::kFloat, device_), 0.1, true},
                          [](Stack& out) {
                            at::Tensor y = out[0].toTensor().clone();
                            y.view(-1)[7] = y.view(-1)[7].item<float>() == 0 ? 1.0 : 0.0;
                            out[0] = y;
                          },
                          device_));
  EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
  EXPECT_EQ(v.outputs(0).failed_metric(), "mismatch_rate");
}

// In every dtype: an element of a replayed randn changed by 5e-4 of its value (float64 was judged
// by msprobe's two-way chain and passed) or by one step (integers) is an error on mismatch_rate.
TEST_P(RandomReplayTest, ReplayedDrawsAreExactInEveryDtype) {
  auto checker = MakeChecker(GetParam(), RandomChecks::kAuto);
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const auto opts = at::TensorOptions().dtype(dtype).device(device_);
    const v1::ApiCall clean = RandomCall(
        "aten::normal_", "", {at::empty({4096}, opts), 0.0, 1.0, c10::IValue()}, nullptr, device_);
    EXPECT_EQ(StatusText(Check(*checker, clean).status()), "pass");
    const v1::Verdict v = Check(
        *checker, RandomCall(
                      "aten::normal_", "", {at::empty({4096}, opts), 0.0, 1.0, c10::IValue()},
                      [](Stack& out) {
                        at::Tensor y = out[0].toTensor().clone();
                        y.view(-1)[7] =
                            (y.view(-1)[7].to(at::kDouble) * (1 + 5e-4) + 0.01).to(y.scalar_type());
                        out[0] = y;
                      },
                      device_));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "mismatch_rate");
  }
  const v1::Verdict v = Check(
      *checker,
      RandomCall(
          "aten::randint", "low",
          {3, 17, std::vector<int64_t>{4096}, at::kLong, c10::IValue(), device_, c10::IValue()},
          [](Stack& out) {
            at::Tensor y = out[0].toTensor().clone();
            y.view(-1)[7] = y.view(-1)[7].item<int64_t>() == 3 ? 4 : 3;
            out[0] = y;
          },
          device_));
  EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
  EXPECT_EQ(v.outputs(0).failed_metric(), "mismatch_rate");
}

// ---- the random_property standard ----------------------------------------------------------

class RandomPropertyTest : public ::testing::Test {
 protected:
  std::unique_ptr<CallChecker> checker_ = MakeChecker("cpu", RandomChecks::kStatistical);

  v1::Verdict Judge(const v1::ApiCall& call) { return Check(*checker_, call); }
};

// The faults issue 23 names, each an error on the metric that sees it.
// Each an error on its metric, its message saying what broke in the words of the property.
TEST_F(RandomPropertyTest, PlantedFaultsAreErrorsOnTheMetricThatSeesThem) {
  const double p = 0.1;
  // dropout scaled by 1/p: the kept elements are 9x too large.
  {
    const at::Tensor x = Randn({256, 256});
    const v1::Verdict v = Judge(RandomCall("aten::dropout", "", {x, p, true}, [&](Stack& out) {
      out[0] = x * at::bernoulli(at::full_like(x, 1 - p)) / p;
    }));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "kept_scale");
    EXPECT_THAT(v.outputs(0).message(),
                HasSubstr("elements are neither dropped (0) nor kept (1.11111 x input)"));
  }
  // dropout keeping 5% too few elements at p = 0.1 on a 1M-element tensor.
  {
    const at::Tensor x = Randn({1024, 1024});
    const v1::Verdict v = Judge(RandomCall("aten::dropout", "", {x, p, true}, [&](Stack& out) {
      out[0] = x * at::bernoulli(at::full_like(x, (1 - p) * 0.95)) / (1 - p);
    }));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "rate");
    EXPECT_THAT(v.outputs(0).message(), HasSubstr("ERROR: keep rate 0.8"));
    EXPECT_NEAR(v.outputs(0).metrics().at("keep_rate"), 0.855, 0.002);
    std::printf("dropout keeping 5%% too few: %s\n", v.outputs(0).message().c_str());
  }
  // randn with variance 1.1.
  {
    const v1::Verdict v = Judge(RandomCall(
        "aten::randn", "",
        {std::vector<int64_t>{100000}, c10::IValue(), c10::IValue(), c10::IValue(), c10::IValue()},
        [](Stack& out) { out[0] = out[0].toTensor() * std::sqrt(1.1); }));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "variance");
    EXPECT_THAT(v.outputs(0).message(), HasSubstr("ERROR: mean square of (value - mean) / std 1."));
  }
  // uniform_ shifted by 0.05 of its range.
  {
    const v1::Verdict v =
        Judge(RandomCall("aten::uniform_", "", {at::empty({100000}), -2.0, 3.0, c10::IValue()},
                         [](Stack& out) { out[0] = out[0].toTensor() + 0.05 * 5.0; }));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "support");
    EXPECT_THAT(v.outputs(0).message(), HasSubstr("values outside [from, to]"));
  }
  // randperm with one duplicate.
  {
    const v1::Verdict v = Judge(
        RandomCall("aten::randperm", "",
                   {1000, at::kLong, c10::IValue(), c10::IValue(), c10::IValue()}, [](Stack& out) {
                     at::Tensor perm = out[0].toTensor().clone();
                     perm[1] = perm[0];
                     out[0] = perm;
                   }));
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    EXPECT_EQ(v.outputs(0).failed_metric(), "permutation");
    EXPECT_THAT(v.outputs(0).message(), HasSubstr("ERROR: 1 values are repeated"));
  }
}

// More faults a wrong kernel makes: each is an error on its metric.
TEST_F(RandomPropertyTest, MoreFaultsOfEveryFamily) {
  auto expect_error = [&](const v1::ApiCall& call, const std::string& metric, int output = 0) {
    const v1::Verdict v = Judge(call);
    EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
    ASSERT_GT(v.outputs_size(), output);
    EXPECT_EQ(v.outputs(output).failed_metric(), metric) << v.ShortDebugString();
  };
  // native_dropout whose mask is inverted.
  expect_error(RandomCall("aten::native_dropout", "", {Randn({128, 64}), 0.3, true},
                          [](Stack& out) { out[1] = out[1].toTensor().logical_not(); }),
               "mask", 1);
  // feature dropout that drops single elements instead of whole channels.
  {
    const at::Tensor x = Randn({8, 16, 10});
    expect_error(RandomCall("aten::feature_dropout", "", {x, 0.25, true},
                            [&](Stack& out) { out[0] = at::dropout(x, 0.25, true); }),
                 "mask");
  }
  // dropout that ignores train=False.
  {
    const at::Tensor x = Randn({64, 64});
    expect_error(RandomCall("aten::dropout", "", {x, 0.5, false},
                            [&](Stack& out) { out[0] = at::dropout(x, 0.5, true); }),
                 "kept_scale");
  }
  // bernoulli_ drawing ones with probability 0.33 instead of 0.3, on 200k elements.
  expect_error(RandomCall("aten::bernoulli_", "float", {at::empty({200000}), 0.3, c10::IValue()},
                          [](Stack& out) { out[0] = at::bernoulli(at::full({200000}, 0.33)); }),
               "rate");
  // normal_ whose mean is off by 0.05 std.
  expect_error(RandomCall("aten::normal_", "", {at::empty({100000}), 1.0, 2.0, c10::IValue()},
                          [](Stack& out) { out[0] = out[0].toTensor() + 0.1; }),
               "mean");
  // exponential_ at rate 1.1 x lambda.
  expect_error(RandomCall("aten::exponential_", "", {at::empty({100000}), 2.0, c10::IValue()},
                          [](Stack& out) { out[0] = out[0].toTensor() / 1.1; }),
               "mean");
  // randint that includes `high`.
  expect_error(RandomCall("aten::randint", "low",
                          {3, 17, std::vector<int64_t>{4096}, at::kLong, c10::IValue(),
                           c10::IValue(), c10::IValue()},
                          [](Stack& out) { out[0] = at::randint(3, 18, {4096}); }),
               "support");
  // multinomial drawing a category of weight 0.
  expect_error(
      RandomCall("aten::multinomial", "", {at::tensor({0.5, 0.0, 0.5}), 100, true, c10::IValue()},
                 [](Stack& out) {
                   at::Tensor idx = out[0].toTensor().clone();
                   idx[0] = 1;
                   out[0] = idx;
                 }),
      "support");
  // multinomial without replacement repeating an index.
  expect_error(RandomCall("aten::multinomial", "", {at::rand({4, 10}), 5, false, c10::IValue()},
                          [](Stack& out) {
                            at::Tensor idx = out[0].toTensor().clone();
                            idx[0][1] = idx[0][0];
                            out[0] = idx;
                          }),
               "permutation");
  // multinomial with replacement skewed towards category 0.
  expect_error(
      RandomCall("aten::multinomial", "",
                 {at::tensor({0.25, 0.25, 0.25, 0.25}), 20000, true, c10::IValue()},
                 [](Stack& out) {
                   out[0] = at::multinomial(at::tensor({0.28, 0.24, 0.24, 0.24}), 20000, true);
                 }),
      "frequency");
  // rand whose values are squared (right support, wrong distribution).
  expect_error(RandomCall("aten::rand", "",
                          {std::vector<int64_t>{50000}, c10::IValue(), c10::IValue(), c10::IValue(),
                           c10::IValue()},
                          [](Stack& out) { out[0] = out[0].toTensor().square(); }),
               "mean");
}

// The exact replay and the property checks say what they did; what cannot be checked is SKIP
// with its reason; a malformed generator state is refused or explained.
// A call the agent saw draw although no catalogue lists its operator (ApiCall.drew_random), as a
// client written from the proto sends it: replayed from the generator state read at its entry,
// so the same draws judge it bit for bit; without a state, or from another torch, SKIP saying
// why; never judged as a deterministic op.
at::Tensor Noisy(const at::Tensor& x) { return x + at::rand_like(x); }

TORCH_LIBRARY(parity_test_undeclared_draw, m) {
  m.def("noisy(Tensor x) -> Tensor");
  m.impl("noisy", c10::DispatchKey::CPU, &Noisy);
}

TEST(UndeclaredRandomTest, ACallThatDrewIsReplayedFromItsEntryStateOrSkipSayingWhy) {
  const at::Tensor x = at::randn({64});
  v1::ApiCall call = RandomCall("parity_test_undeclared_draw::noisy", "", {x});
  call.set_drew_random(true);
  auto auto_checker = MakeChecker("cpu", RandomChecks::kAuto);
  v1::Verdict v = Check(*auto_checker, call);
  EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
  EXPECT_EQ(v.outputs(0).standard(), "binary");
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("replayed from the training's cpu generator"));
  // A kernel that drew other numbers is an error.
  v1::ApiCall wrong = RandomCall("parity_test_undeclared_draw::noisy", "", {x},
                                 [](Stack& out) { out[0] = out[0].toTensor() + 0.5; });
  wrong.set_drew_random(true);
  v = Check(*auto_checker, wrong);
  EXPECT_EQ(StatusText(v.status()), "error") << v.ShortDebugString();
  EXPECT_EQ(v.outputs(0).failed_metric(), "mismatch_rate");
  // No state, another torch's draws, or replays turned off: SKIP naming the reason.
  const std::vector<std::pair<std::function<void(v1::ApiCall&)>, std::string>> skips = {
      {[](v1::ApiCall& c) { c.clear_generator(); }, "could not read its generator's state"},
      {[](v1::ApiCall& c) { c.mutable_generator()->set_torch_version("2.3.1"); },
       "may draw differently"}};
  for (const auto& [change, why] : skips) {
    v1::ApiCall other = call;
    change(other);
    v = Check(*auto_checker, other);
    EXPECT_EQ(StatusText(v.status()), "SKIP") << v.ShortDebugString();
    EXPECT_THAT(v.message(), HasSubstr("drew random numbers in the training"));
    EXPECT_THAT(v.message(), HasSubstr(why));
  }
  v = Check(*MakeChecker("cpu", RandomChecks::kStatistical), call);
  EXPECT_EQ(StatusText(v.status()), "SKIP");
  EXPECT_THAT(v.message(), HasSubstr("parity.random_checks is statistical"));
  // Unmarked, the same call is an ordinary op: its bench draws other numbers.
  call.set_drew_random(false);
  v = Check(*auto_checker, call);
  EXPECT_NE(v.outputs(0).standard(), "binary") << v.ShortDebugString();
}

TEST_F(RandomPropertyTest, EdgeCasesSayWhatHappened) {
  const at::Tensor x = Randn({32, 32});
  v1::ApiCall call = RandomCall("aten::dropout", "", {x, 0.1, true});
  auto auto_checker = MakeChecker("cpu", RandomChecks::kAuto);
  // Another torch version drew: judged by properties, saying why.
  v1::ApiCall other = call;
  other.mutable_generator()->set_torch_version("2.3.1");
  v1::Verdict v = Check(*auto_checker, other);
  EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
  EXPECT_EQ(v.outputs(0).standard(), "random_property");
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("may draw differently"));
  // The agent sends the generator's kind as an enum, with libtorch's name beside it.
  EXPECT_EQ(call.generator().device(), v1::GENERATOR_DEVICE_CPU);
  EXPECT_EQ(call.generator().device_type(), "cpu");
  // An NPU's generator: no generator of that kind on a CPU bench. The kind decides, not the name.
  other = call;
  other.mutable_generator()->set_device_type("npu");
  other.mutable_generator()->set_device(v1::GENERATOR_DEVICE_NPU);
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.outputs(0).standard(), "random_property");
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("npu generator"));
  other.mutable_generator()->set_device_type("cpu");
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.outputs(0).standard(), "random_property") << "device NPU, whatever the name says";
  // An agent from before the kind was sent: its device_type is mapped; a CPU state replays.
  other = call;
  other.mutable_generator()->clear_device();
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.outputs(0).standard(), "binary") << v.ShortDebugString();
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("replayed from the training's cpu generator"));
  other.mutable_generator()->set_device_type("npu");
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.outputs(0).standard(), "random_property");
  // A kind that is no GeneratorDevice: malformed, naming the field.
  other = call;
  other.mutable_generator()->set_device(static_cast<v1::GeneratorDevice>(99));
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_THAT(v.message(),
              HasSubstr("ApiCall.generator.device: 99 is not a parity.v1.GeneratorDevice"));
  // No state at all (an agent that could not read it).
  other = call;
  other.clear_generator();
  v = Check(*auto_checker, other);
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("no generator state"));
  // A state libtorch refuses (wrong size): explained, judged by properties.
  other = call;
  other.mutable_generator()->set_state("short");
  v = Check(*auto_checker, other);
  EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
  EXPECT_THAT(v.outputs(0).message(), HasSubstr("generator state refused"));
  // A state over the cap: the call is rejected, naming the field.
  other = call;
  other.mutable_generator()->set_state(std::string(common::kMaxGeneratorStateBytes + 1, 'x'));
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_THAT(v.message(), HasSubstr("ApiCall.generator.state"));
  // A device type with a control character: malformed.
  other = call;
  other.mutable_generator()->set_device_type("cpu\n");
  v = Check(*auto_checker, other);
  EXPECT_EQ(v.status(), v1::VERDICT_STATUS_REJECTED);
  // The server told not to check random ops.
  v = Check(*MakeChecker("cpu", RandomChecks::kSkip), call);
  EXPECT_EQ(StatusText(v.status()), "SKIP");
  EXPECT_THAT(v.message(), HasSubstr("parity.random_checks is skip"));
  // A random op without a property check, not replayable: SKIP with the reason.
  v1::ApiCall binomial = RandomCall("aten::binomial", "",
                                    {at::full({100}, 10.0), at::full({100}, 0.5), c10::IValue()});
  binomial.mutable_generator()->set_device_type("npu");
  binomial.mutable_generator()->set_device(v1::GENERATOR_DEVICE_NPU);
  v = Check(*auto_checker, binomial);
  EXPECT_EQ(StatusText(v.status()), "SKIP");
  EXPECT_THAT(v.message(), HasSubstr("has no property check"));
  // ... and the same call replayed exactly passes.
  binomial.mutable_generator()->set_device_type("cpu");
  binomial.mutable_generator()->set_device(v1::GENERATOR_DEVICE_CPU);
  v = Check(*auto_checker, binomial);
  EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
  // Uninitialised outputs stay SKIP with their reason.
  v1::ApiCall empty = testing::BuildCall("aten::empty", "memory_format",
                                         {std::vector<int64_t>{4}, c10::IValue(), c10::IValue(),
                                          c10::IValue(), c10::IValue(), c10::IValue()});
  v = Check(*auto_checker, empty);
  EXPECT_EQ(StatusText(v.status()), "SKIP");
  EXPECT_THAT(v.message(), HasSubstr("uninitialised output"));
}

// ---- false alarms ----------------------------------------------------------------------------

// One clean call of a random op with random parameters, dtype and size (1 to 2^18 elements,
// log-uniform), as a correct device makes it.
v1::ApiCall RandomCleanCall(std::mt19937_64& rng, at::ScalarType dt, int op) {
  std::uniform_real_distribution<double> unit(0, 1);
  const int64_t n = static_cast<int64_t>(std::exp(unit(rng) * std::log(262144.0))) + 1;
  const std::vector<int64_t> shape = {n};
  const double p = std::round(unit(rng) * 90) / 100 + 0.05;  // 0.05 .. 0.95
  const c10::IValue none;
  switch (op) {
    case 0:
      return RandomCall("aten::dropout", "", {Randn(shape, dt), p, true});
    case 1:
      return RandomCall("aten::native_dropout", "", {Randn(shape, dt), p, true});
    case 2:
      return RandomCall("aten::feature_dropout", "",
                        {Randn({std::max<int64_t>(n / 64, 1), 8, 8}, dt), p, true});
    case 3:
      return RandomCall("aten::alpha_dropout", "", {Randn(shape, dt), p, true});
    case 4:
      return RandomCall("aten::bernoulli", "", {at::rand(shape).to(dt), none});
    case 5:
      return RandomCall("aten::bernoulli_", "float", {at::empty(shape, dt), p, none});
    case 6:
      return RandomCall("aten::rand", "", {shape, dt, none, none, none});
    case 7:
      return RandomCall("aten::randn", "", {shape, dt, none, none, none});
    case 8:
      return RandomCall("aten::uniform_", "", {at::empty(shape, dt), -p * 10, p * 3, none});
    case 9:
      return RandomCall("aten::normal_", "", {at::empty(shape, dt), p * 4 - 2, p + 0.5, none});
    case 10:
      return RandomCall("aten::exponential_", "", {at::empty(shape, dt), p * 3, none});
    case 11:
      return RandomCall("aten::randint", "low",
                        {-5, static_cast<int64_t>(p * 100), shape, at::kLong, none, none, none});
    case 12:
      return RandomCall("aten::randperm", "", {n, at::kLong, none, none, none});
    case 13: {
      const int64_t categories = 2 + n % 50;
      const bool replacement = n % 2 == 0;
      const int64_t samples = replacement ? 1 + n % 400 : 1 + n % categories;
      return RandomCall("aten::multinomial", "",
                        {at::rand({1 + n % 7, categories}), samples, replacement, none});
    }
    case 14:
      return RandomCall("aten::poisson", "", {at::rand(shape) * 5, none});
    default:
      return RandomCall("aten::geometric_", "", {at::empty(shape, dt), p, none});
  }
}

struct FalseAlarmCount {
  int calls = 0, errors = 0, judged = 0;
  std::string first;
};

FalseAlarmCount CountFalseAlarms(int calls, double false_alarm, uint64_t seed) {
  auto checker = MakeChecker("cpu", RandomChecks::kStatistical, false_alarm);
  std::mt19937_64 rng(seed);
  at::manual_seed(static_cast<uint64_t>(seed));
  FalseAlarmCount c;
  const at::ScalarType dtypes[] = {at::kFloat, at::kFloat, at::kBFloat16, at::kHalf, at::kDouble};
  for (int i = 0; i < calls; ++i) {
    const at::ScalarType dt = dtypes[rng() % 5];
    const int op = static_cast<int>(rng() % 16);
    v1::ApiCall call;
    try {
      call = RandomCleanCall(rng, dt, op);
    } catch (const c10::Error&) {  // a dtype this libtorch's CPU kernel lacks (float16 bernoulli)
      call = RandomCleanCall(rng, at::kFloat, op);
    }
    const v1::Verdict v = Check(*checker, call);
    ++c.calls;
    c.judged += v.status() == v1::VERDICT_STATUS_PASS || v.status() == v1::VERDICT_STATUS_ERROR;
    if (v.status() == v1::VERDICT_STATUS_ERROR) {
      if (c.errors++ == 0) c.first = v.ShortDebugString();
    }
  }
  return c;
}

// 10,000 clean calls of mixed ops, dtypes and sizes at the shipped false-alarm probability
// (1e-6 per call): none is an error. At 1e-2 per call the count stays under its bound, so the
// bounds are not optimistic (and shows how conservative they are).
TEST(RandomFalseAlarmTest, TenThousandCleanCallsAreNeverErrors) {
  const auto start = std::chrono::steady_clock::now();
  const FalseAlarmCount shipped = CountFalseAlarms(10000, 1e-6, 23);
  EXPECT_EQ(shipped.errors, 0) << shipped.first;
  EXPECT_EQ(shipped.judged, shipped.calls);
  const FalseAlarmCount loose = CountFalseAlarms(10000, 1e-2, 24);
  // At most 1e-2 per call: 100 expected at worst; 160 is 6 standard deviations above it.
  EXPECT_LE(loose.errors, 160) << loose.first;
  std::printf(
      "random_property false alarms: %d of %d clean calls at alpha 1e-6; %d of %d at alpha 1e-2 "
      "(%.1f s)\n",
      shipped.errors, shipped.calls, loose.errors, loose.calls,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// libtorch's own low-precision CPU kernels draw from coarse grids (bfloat16 randn: 8-bit
// uniforms into Box-Muller, variance ~0.986, |z| <= 3.33): at 4M elements, where the statistical
// bounds are tight, the dtype allowances keep them passing; a float32 variance of 1.1 still fails.
TEST(RandomFalseAlarmTest, LargeLowPrecisionDrawsPass) {
  auto checker = MakeChecker("cpu", RandomChecks::kStatistical);
  const c10::IValue none;
  const std::vector<int64_t> shape = {4 << 20};
  for (at::ScalarType dt : {at::kBFloat16, at::kHalf, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dt));
    for (const v1::ApiCall& call :
         {RandomCall("aten::randn", "", {shape, dt, none, none, none}),
          RandomCall("aten::rand", "", {shape, dt, none, none, none}),
          RandomCall("aten::normal_", "", {at::empty(shape, dt), 0.5, 3.0, none}),
          RandomCall("aten::uniform_", "", {at::empty(shape, dt), -1.0, 7.0, none}),
          RandomCall("aten::exponential_", "", {at::empty(shape, dt), 0.5, none})}) {
      const v1::Verdict v = Check(*checker, call);
      EXPECT_EQ(StatusText(v.status()), "pass") << v.ShortDebugString();
    }
  }
}

// ---- the bounds themselves --------------------------------------------------------------------

// The Chernoff rate bound holds for small n too: the exact binomial probability of leaving it is
// at most alpha (summed over every k outside).
TEST(RandomBoundsTest, BinomialBoundIsValidForEverySize) {
  for (int n : {1, 2, 5, 10, 30, 100, 1000}) {
    for (double q : {0.01, 0.1, 0.5, 0.9}) {
      const double alpha = 1e-3;
      const Interval b = BinomialRateBounds(n, q, alpha);
      double outside = 0;
      for (int k = 0; k <= n; ++k) {
        if (b.Contains(static_cast<double>(k) / n)) continue;
        outside += std::exp(std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1) +
                            k * std::log(q) + (n - k) * std::log1p(-q));
      }
      EXPECT_LE(outside, alpha) << "n " << n << " q " << q;
    }
  }
  EXPECT_NEAR(NormalUpperQuantile(0.025), 1.959964, 1e-5);
  EXPECT_NEAR(DkwEpsilon(1e6, 1e-6), std::sqrt(std::log(2e6) / 2e6), 1e-12);
}

}  // namespace
}  // namespace parity::server
