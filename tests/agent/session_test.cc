// The agent's session in-process against a real ParityServer on loopback whose handler records
// what arrives: call names (op, overload, per-step call index, phase, module, forward link),
// fail_fast, reconnection, wedged and dying servers, the accounting of every call, verdict
// batches, and the priority of the agent's threads.
#include "agent/transport/session.h"
#include "common/naming/operator_catalogue.h"
#include "parity/v1/parity.pb.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/transport/thread_priority.h"
#include "common/torch/generator_read.h"
#include "common/torch/value_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_testing.h"
#include "tests/testing/tls_peer.h"

namespace parity::agent {
namespace {

using namespace testing;  // NOLINT(build/namespaces): the agent tests' own helpers

TEST(SessionTest, NamesCallsByOpOverloadStepIndexPhaseAndModule) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  for (int step = 0; step < 2; ++step) {
    TrainStep(w, x);
    // Two more calls of one op in the step: call indexes 0 and 1.
    torch::Tensor y = torch::add(x, x);
    y = torch::add(y, x);
    std::string error;
    ASSERT_TRUE(agent->Step(&error)) << error;
  }
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();

  std::set<std::tuple<std::string, std::string, uint64_t, int, int64_t, std::string>> got;
  std::set<std::pair<std::string, std::string>> backward_links;
  for (const Seen& s : server.calls()) {
    got.emplace(s.op, s.overload, s.call_index, s.phase, s.step, s.module_path);
    if (s.phase == v1::PHASE_BACKWARD) backward_links.emplace(s.op, s.forward_op);
    EXPECT_EQ(s.rank, 0);  // no process group: rank 0
  }
  for (int64_t step : {0, 1}) {
    // Top-level calls only: linear, not the addmm/matmul inside it.
    EXPECT_TRUE(got.count({"aten::linear", "", 0, v1::PHASE_FORWARD, step, "mlp"})) << step;
    EXPECT_TRUE(got.count({"aten::gelu", "", 0, v1::PHASE_FORWARD, step, "mlp"})) << step;
    EXPECT_TRUE(got.count({"aten::sum", "", 0, v1::PHASE_FORWARD, step, ""})) << step;
    // Call indexes count per op within the step and restart at each step.
    EXPECT_TRUE(got.count({"aten::add", "Tensor", 0, v1::PHASE_FORWARD, step, ""})) << step;
    EXPECT_TRUE(got.count({"aten::add", "Tensor", 1, v1::PHASE_FORWARD, step, ""})) << step;
    EXPECT_FALSE(got.count({"aten::add", "Tensor", 2, v1::PHASE_FORWARD, step, ""})) << step;
  }
  for (const auto& entry : got) {
    EXPECT_NE(std::get<0>(entry), "aten::addmm") << "a nested call was captured";
  }
  // Backward kernels are linked to the forward call that made their autograd node.
  EXPECT_TRUE(backward_links.count({"aten::gelu_backward", "aten::gelu"}));
}

// A snapshot holds the values a call saw, whatever the tensor's layout, and not what the training
// writes into the tensor afterwards: a contiguous view with a storage offset (copied with memcpy
// from where the view starts), a transposed one (copied element by element), pooled (16 KiB or
// more) and small.
TEST(SessionTest, SnapshotsHoldTheValuesTheCallSaw) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.link.reuse_bytes = 0;  // every tensor inline in its call, to be read back here
  auto agent = StartAgent(config);
  torch::Tensor big = torch::arange(0, 40000, torch::kFloat);  // 160 KB
  torch::Tensor small = torch::arange(0, 200, torch::kFloat);
  std::vector<torch::Tensor> views = {big.narrow(0, 1000, 20000), big.view({200, 200}).t(),
                                      small.narrow(0, 3, 50), small.view({10, 20}).t()};
  std::vector<torch::Tensor> seen;
  for (torch::Tensor& v : views) {
    seen.push_back(v.clone());
    torch::Tensor y = torch::neg(v);
    v.add_(1000);  // the training writes the tensor after the call
  }
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();

  std::set<uint64_t> checked;  // the server's workers record calls in any order: by call index
  for (const v1::ApiCall& call : server.raw_calls()) {
    if (call.op_name() != "aten::neg") continue;
    const uint64_t i = call.call_index();
    ASSERT_LT(i, seen.size());
    common::ValueDecoder decoder(common::DecodeLimits{});
    c10::IValue input, output;
    ASSERT_TRUE(decoder.Decode(call.inputs(0), "in", &input).ok());
    ASSERT_TRUE(decoder.Decode(call.outputs(0), "out", &output).ok());
    EXPECT_TRUE(torch::equal(input.toTensor(), seen[i])) << "view " << i;
    EXPECT_TRUE(torch::equal(output.toTensor(), -seen[i])) << "view " << i;
    checked.insert(i);
  }
  EXPECT_EQ(checked.size(), views.size());
}

// A random op's call carries the state of the generator it drew from, with the generator's kind
// as the proto's enum (the server decides its replay by it) and libtorch's name beside it.
TEST(SessionTest, ARandomOpCarriesItsGeneratorsKindAndState) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  torch::manual_seed(0);
  const torch::Tensor y = torch::dropout(torch::ones({64, 64}), 0.25, /*train=*/true);
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();
  int dropouts = 0;
  for (const v1::ApiCall& call : server.raw_calls()) {
    if (call.op_name() != "aten::dropout") continue;
    ++dropouts;
    ASSERT_TRUE(call.has_generator());
    EXPECT_EQ(call.generator().device(), v1::GENERATOR_DEVICE_CPU);
    EXPECT_EQ(call.generator().device_type(), "cpu");
    EXPECT_FALSE(call.generator().state().empty());
    EXPECT_FALSE(call.generator().torch_version().empty());
  }
  EXPECT_EQ(dropouts, 1);
}

// An op that draws without being in any catalogue (a user's fused kernel; SDPA with dropout on
// torch 2.x): the agent sees the generator move across its call and sends it as a random call
// with the state read at its entry, from which the same draws replay. A deterministic op is not
// marked; with
// parity.detect_random off nothing is.
at::Tensor Noisy(const at::Tensor& x) { return x + at::rand_like(x); }

TORCH_LIBRARY(parity_test_draw, m) {
  m.def("noisy(Tensor x) -> Tensor");
  m.impl("noisy", c10::DispatchKey::CPU, &Noisy);
}

TEST(SessionTest, AnOpThatDrawsWithoutBeingListedIsSentAsRandomWithItsEntryState) {
  static const auto noisy = c10::Dispatcher::singleton()
                                .findSchemaOrThrow("parity_test_draw::noisy", "")
                                .typed<at::Tensor(const at::Tensor&)>();
  for (const bool detect : {true, false}) {
    RecordingServer server;
    common::AgentConfig config = Config(server.port());
    config.parity.capture.detect_random = detect;
    auto agent = StartAgent(config);
    const torch::Tensor x = torch::ones({16});
    std::vector<std::string> entry_states;
    for (int i = 0; i < 3; ++i) {
      entry_states.push_back(common::GeneratorStateBytes(at::detail::getDefaultCPUGenerator()));
      noisy.call(x);
      torch::mul(x, 2.0);  // deterministic
    }
    ASSERT_TRUE(agent->Flush(20000));
    agent->Close();
    std::vector<v1::ApiCall> drawn;
    for (const v1::ApiCall& call : server.raw_calls()) {
      if (call.op_name() == "aten::mul") {
        EXPECT_FALSE(call.drew_random());
      }
      if (call.op_name() == "parity_test_draw::noisy") drawn.push_back(call);
    }
    ASSERT_EQ(drawn.size(), 3u);
    std::sort(drawn.begin(), drawn.end(), [](const v1::ApiCall& a, const v1::ApiCall& b) {
      return a.sequence() < b.sequence();  // the order of the calls
    });
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      EXPECT_EQ(drawn[i].drew_random(), detect);
      ASSERT_EQ(drawn[i].has_generator(), detect);
      if (!detect) continue;
      EXPECT_EQ(drawn[i].generator().device(), v1::GENERATOR_DEVICE_CPU);
      EXPECT_EQ(drawn[i].generator().state(), entry_states[i]) << "the state at its entry";
    }
  }
}

// Trailing arguments left at their schema's default are not sent (the server appends its own
// schema's defaults): a newer torch's added argument (torch 2.x's _foreach_norm dtype=None) then
// reaches a server of an older torch as a call it knows. One set to another value is sent.
TEST(SessionTest, TrailingArgumentsAtTheirDefaultAreNotSent) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  const torch::Tensor x = torch::ones({4, 4});
  torch::sum(x, {0});                    // sum.dim_IntList(self, dim, keepdim=False, dtype=None)
  torch::sum(x, {0}, /*keepdim=*/true);  // keepdim sent, dtype not
  torch::sum(x, {0}, false, torch::kDouble);  // everything sent
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();
  std::map<uint64_t, int> sizes;  // by sequence: the order of the calls
  for (const v1::ApiCall& call : server.raw_calls()) {
    if (call.op_name() == "aten::sum" && call.overload() == "dim_IntList") {
      sizes[call.sequence()] = call.inputs_size();
    }
  }
  std::vector<int> in_order;
  for (const auto& [sequence, size] : sizes) in_order.push_back(size);
  EXPECT_EQ(in_order, (std::vector<int>{2, 3, 4}));
}

// The engine's own work for a node is backward work of that node: the sum that reduces a
// broadcast bias's gradient to the bias's shape and the add that accumulates the gradients of a
// tensor used twice (add, or add_ in libtorch 2.x) run outside the node's record, and are linked to
// the node's forward call and module like the node's own kernels.
TEST(SessionTest, EngineWorkOutsideANodeIsBackwardOfThatNode) {
  RecordingServer server;
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({3, 4}, torch::requires_grad());
  torch::Tensor b = torch::randn({3}, torch::requires_grad());
  const torch::Tensor x = torch::randn({5, 4});
  auto agent = StartAgent(Config(server.port()));
  PushModuleScope("proj");
  torch::Tensor h = torch::addmm(b, x, w.t());  // b broadcast over the rows
  PopModuleScope();
  torch::Tensor y = torch::mul(h, h);  // h used twice: its two gradients are added
  y.sum().backward();
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();

  bool bias_sum = false, accumulate = false;
  for (const Seen& s : server.calls()) {
    if (s.op == "aten::sum" && s.overload == "dim_IntList") {
      EXPECT_EQ(s.phase, v1::PHASE_BACKWARD) << "the bias gradient's reduction";
      EXPECT_EQ(s.forward_op, "aten::addmm");
      EXPECT_EQ(s.module_path, "proj") << "attributed to the forward call's module";
      bias_sum = true;
    }
    // libtorch 1.13 adds the two gradients out of place; 2.x into the first when it holds the
    // last reference to it (InputBuffer's in-place accumulation): add_.
    if ((s.op == "aten::add" || s.op == "aten::add_") && s.overload == "Tensor") {
      EXPECT_EQ(s.phase, v1::PHASE_BACKWARD) << "the accumulation of h's two gradients";
      EXPECT_EQ(s.forward_op, "aten::mul");
      accumulate = true;
    }
    if (s.phase == v1::PHASE_FORWARD) {
      EXPECT_TRUE(s.op == "aten::addmm" || s.op == "aten::t" || s.op == "aten::mul" ||
                  s.op == "aten::sum" || s.op == "aten::ones_like")
          << s.op << " labelled forward";
    }
  }
  EXPECT_TRUE(bias_sum) << "no bias-gradient sum captured";
  EXPECT_TRUE(accumulate) << "no gradient accumulation captured";
}

// A white list in msprobe's names selects the forward calls of those APIs and the backward calls
// their autograd nodes ran; a scope written as the CSVs print names (with an overload) works.
TEST(SessionTest, FiltersTakeMsprobeNamesAndCsvNames) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.white_list = {"Functional.linear", "Tensor.add"};
  auto agent = StartAgent(config);
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  TrainStep(w, x);
  torch::add(x, x);
  ASSERT_TRUE(agent->Step(nullptr));
  ASSERT_TRUE(agent->Flush(20000));
  agent->Close();
  std::set<std::pair<std::string, std::string>> got;  // (op, forward op)
  for (const Seen& s : server.calls()) got.emplace(s.op, s.forward_op);
  EXPECT_TRUE(got.count({"aten::linear", ""}));
  EXPECT_TRUE(got.count({"aten::add", ""}));
  EXPECT_TRUE(got.count({"aten::mm", "aten::linear"})) << "linear's backward";
  for (const auto& [op, forward] : got) {
    EXPECT_TRUE(op == "aten::linear" || op == "aten::add" || op == "aten::add_" ||
                forward == "aten::linear")
        << op << " (forward " << forward << ") is not selected by the white list";
  }

  RecordingServer scoped;
  config = Config(scoped.port());
  config.scope = {"aten::add.Tensor.1", "aten::add.Tensor.2"};
  auto second = StartAgent(config);
  for (int i = 0; i < 4; ++i) torch::add(x, x);
  ASSERT_TRUE(second->Flush(20000));
  second->Close();
  std::vector<uint64_t> indices;
  for (const Seen& s : scoped.calls()) indices.push_back(s.call_index);
  std::sort(indices.begin(), indices.end());
  EXPECT_EQ(indices, (std::vector<uint64_t>{1, 2}));
}

// The sender lets gRPC hold a call back only while another is queued to follow it: the last
// call of a burst goes out at once, not with the next message the agent happens to send (its
// periodic stats, here an hour away), so its verdict comes back.
TEST(SessionTest, TheLastCallOfABurstIsSentWithoutWaitingForMore) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.sender.stats_interval_ms = 3600 * 1000;
  auto agent = StartAgent(config);
  const torch::Tensor x = torch::randn({3, 4});
  torch::relu(x);  // a burst of one, on a quiet stream: nothing else would carry it
  ASSERT_TRUE(agent->Flush(20000));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  for (int i = 0; i < 3; ++i) TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  const auto counters = agent->GetCounters();
  EXPECT_GT(counters.sent, 0u);
  EXPECT_EQ(server.calls().size(), counters.sent);
  agent->Close();
}

// A communication-fused op, as torch_npu's are declared: its schema takes a communicator string
// (npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, ...)). Its result depends on the other
// ranks: never copied, counted as dropped (communication), whatever its name.
at::Tensor FakeMmAllReduce(const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom) {
  return at::mm(x1, x2);
}

TORCH_LIBRARY(parity_test_comm, m) {
  m.def("mm_all_reduce(Tensor x1, Tensor x2, str hcom) -> Tensor");
  m.def("mm_named(Tensor x1, Tensor x2, str name) -> Tensor");
  m.impl("mm_all_reduce", c10::DispatchKey::CPU, &FakeMmAllReduce);
  m.impl("mm_named", c10::DispatchKey::CPU, &FakeMmAllReduce);
}

TEST(SessionTest, AnOpWhoseSchemaTakesACommunicatorIsCommunicationNeverCopied) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  const torch::Tensor a = torch::randn({4, 4}), b = torch::randn({4, 4});
  static const auto comm =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("parity_test_comm::mm_all_reduce", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
  static const auto named =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("parity_test_comm::mm_named", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
  comm.call(a, b, "hccl_world_group");
  comm.call(a, b, "hccl_world_group");
  named.call(a, b, "not a communicator");  // a string, but not a communicator's name
  ASSERT_TRUE(agent->Flush(20000));
  const Counters c = agent->GetCounters();
  agent->Close();
  EXPECT_EQ(c.dropped.at("communication"), 2u);
  std::set<std::string> ops;
  for (const Seen& s : server.calls()) ops.insert(s.op);
  EXPECT_EQ(ops.count("parity_test_comm::mm_all_reduce"), 0u);
  EXPECT_EQ(ops.count("parity_test_comm::mm_named"), 1u);
}

TEST(SessionTest, FailFastReportsTheFirstErrorAtTheNextStep) {
  RecordingServer server(0, "aten::gelu");
  common::AgentConfig config = Config(server.port());
  config.parity.fail_fast = true;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));  // the verdicts are in
  std::string error;
  EXPECT_FALSE(agent->Step(&error));
  EXPECT_EQ(error,
            "precision error: aten::gelu.0 forward, step 0, module mlp: output 0 max_rel_error "
            "(benchmark)");
  EXPECT_EQ(agent->GetCounters().error, 1u);
  agent->Close();
}

// parity.operator_catalogue that does not parse, or reclassifies a built-in operator: the
// session is not made, and the error names the file and the key (the server's: ServerTest.
// BadServerConfigurationIsAClearStartupError).
TEST(SessionTest, ABadOperatorCatalogueStopsTheAgentNamingTheFile) {
  const std::string dir = parity::testing::MakeTempDir("parity_catalogue_");
  common::AgentConfig config = Config(1);
  config.parity.capture.operator_catalogue = dir + "/mine.json";
  const parity_host host{};
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"random": {"gaussian": ["my_randn"]}})",
            "mine.json: random.gaussian: no such family"},
           {R"({"never_replayed": {"junk": ["randn"]}})", "classifies differently"},
           {"{", "mine.json: not a JSON object"}}) {
    std::ofstream(config.parity.capture.operator_catalogue) << text;
    auto session = Session::Create(config, host);
    ASSERT_FALSE(session.ok()) << text;
    EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(session.status().message(), ::testing::HasSubstr(expected)) << text;
  }
  EXPECT_EQ(common::RandomFamilyOf("aten::randn"), common::RandomFamily::kNormal) << "unchanged";
}

TEST(SessionTest, WithoutFailFastErrorsAreCountedNotRaised) {
  RecordingServer server(0, "aten::gelu");
  auto agent = StartAgent(Config(server.port()));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  ASSERT_TRUE(agent->Flush(20000));
  EXPECT_TRUE(agent->Step(nullptr));
  EXPECT_EQ(agent->GetCounters().error, 1u);
  agent->Close();
}

// Under `block` the first calls of a training wait for the session's first connection (its
// set-up takes a moment: a TLS handshake, a busy server) instead of being dropped as
// disconnected: here the server comes up 300 ms after the training has filled the queue.
TEST(SessionTest, BlockWaitsForTheFirstConnectionInsteadOfDroppingTheFirstCalls) {
  int port = 0;
  {
    RecordingServer probe;
    port = probe.port();
    probe.Shutdown();
  }
  common::AgentConfig config = Config(port);
  config.parity.sender.queue_max_calls = 4;
  config.parity.link.connect_timeout_ms = 10000;
  const torch::Tensor x = torch::randn({3, 4});
  auto agent = StartAgent(config);
  std::unique_ptr<RecordingServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server = std::make_unique<RecordingServer>(port);
  });
  for (int i = 0; i < 20; ++i) torch::add(x, x);
  late.join();
  ASSERT_TRUE(agent->Flush(20000));
  const Counters c = agent->GetCounters();
  agent->Close();
  EXPECT_EQ(c.captured, 20u);
  EXPECT_EQ(c.sent, 20u);
  EXPECT_TRUE(c.dropped.empty() || c.dropped.at("disconnected") == 0) << c.dropped.size();
  EXPECT_EQ(server->calls().size(), 20u);
}

// ...and for that first attempt's wait only, not for the diagnosis of its failure, which may take
// connect_timeout_ms again (issue 65: 9-10 s measured against a 5 s connect_timeout_ms). The
// server completes TLS and then says nothing; every later connection to it (the diagnosis's)
// is held until the training's calls have returned. Had the calls waited for the diagnosis, it
// would have run out its own budget on the held connection ("did not complete the TLS
// handshake"); since they do not, the diagnosis sees what the peer does once released: a hang-up
// after the handshake. The calls the full queue could not take are dropped as disconnected.
TEST(SessionTest, TheFirstAttemptHoldsCallsForItsWaitNotForItsDiagnosis) {
  parity::testing::TlsPeerPki pki;
  std::promise<void> released;
  std::shared_future<void> release = released.get_future().share();
  parity::testing::LoopbackPeer server(/*accept=*/true, [&](int fd, int index) {
    if (index == 0) {  // gRPC's connection: TLS, then silence
      parity::testing::ServeTls(pki, /*refuse_alpn=*/false, fd, /*linger_ms=*/60000);
      return;
    }
    release.wait();
    parity::testing::ServeTls(pki, /*refuse_alpn=*/false, fd, /*linger_ms=*/0);
  });
  common::AgentConfig config = Config(server.port());
  config.parity.link.plaintext = false;
  config.tls_path = pki.agent_dir;
  config.parity.sender.queue_max_calls = 2;
  config.parity.link.connect_timeout_ms = 3000;
  config.parity.sender.flush_timeout_ms = 500;
  const torch::Tensor x = torch::randn({3, 4});
  ::testing::internal::CaptureStderr();
  auto agent = StartAgent(config);
  RunWithHangDetector(std::chrono::seconds(120), [&] {
    for (int i = 0; i < 8; ++i) torch::add(x, x);
  });
  released.set_value();
  RunWithHangDetector(std::chrono::seconds(120), [&] { agent->Close(); });
  const std::string lines = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(lines, ::testing::HasSubstr("closed the connection after the TLS handshake"))
      << lines;
  EXPECT_THAT(lines, ::testing::Not(::testing::HasSubstr("did not complete the TLS handshake")))
      << "the calls waited for the diagnosis\n"
      << lines;
  const Counters c = agent->GetCounters();
  EXPECT_EQ(c.captured, 8u);
  EXPECT_GT(c.dropped.at("disconnected"), 0u);
  ExpectEveryCallAccountedFor(c);
}

TEST(SessionTest, ReconnectsWhenTheServerComesBackAndResumes) {
  auto first = std::make_unique<RecordingServer>();
  const int port = first->port();
  auto agent = StartAgent(Config(port));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  agent->Step(nullptr);
  const size_t before = first->calls().size();
  EXPECT_GT(before, 0u);
  first->Shutdown();
  first.reset();

  // While the server is away the training goes on; under `block` the agent waits for room only
  // while connected, so these calls are dropped as disconnected or sent after reconnecting.
  TrainStep(w, x);
  agent->Step(nullptr);
  RecordingServer second(port);
  // Calls made after the server is back reach it once the agent has reconnected.
  for (int i = 0; i < 200 && agent->GetCounters().reconnects == 0; ++i) {
    TrainStep(w, x);
    agent->Step(nullptr);
    agent->Flush(100);
  }
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  const Counters c = agent->GetCounters();
  agent->Close();
  EXPECT_GE(c.reconnects, 1u);
  const std::vector<Seen> resumed = second.calls();
  ASSERT_FALSE(resumed.empty());
  // The steps kept counting across the outage.
  int64_t max_step = 0;
  for (const Seen& s : resumed) max_step = std::max(max_step, s.step);
  EXPECT_GE(max_step, 2);
  // Nothing is lost silently.
  ExpectEveryCallAccountedFor(c);
}

// A message from the server that does not parse is skipped and counted; the verdicts after it
// still arrive and the connection stays up.
TEST(SessionTest, UnreadableServerMessagesAreCountedAndTheVerdictsAfterThemStillCount) {
  // Field 1 with wire type 7 (no such type), then a length-delimited field cut short.
  for (const std::string& garbage : {std::string("\x0f\x01\x02", 3), std::string("\x12\x7f", 2)}) {
    GarbledServer server(garbage);
    auto agent = StartAgent(Config(server.port()));
    torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
    TrainStep(w, torch::randn({3, 4}));
    ASSERT_TRUE(agent->Flush(20000));  // every verdict came, though each followed garbage
    const Counters c = agent->GetCounters();
    agent->Close();
    ASSERT_GT(c.sent, 0u);
    EXPECT_EQ(server.verdicts_sent(), c.sent);
    EXPECT_EQ(c.verdicts, c.sent);
    EXPECT_EQ(c.pass, c.sent);
    EXPECT_EQ(c.unreadable, c.sent);
    EXPECT_EQ(c.reconnects, 0u);
    EXPECT_TRUE(c.connected);
  }
}

// A VerdictBatch counts every verdict it holds, each as if it had come alone (an item that is
// no verdict is counted as unreadable); the agent says it takes them unless parity.batch_calls
// is 1.
TEST(SessionTest, EveryVerdictOfAVerdictBatchCounts) {
  GarbledServer server("", /*answer_calls=*/true, /*verdicts_per_batch=*/5);
  const torch::Tensor x = torch::randn({3, 4});
  auto agent = StartAgent(Config(server.port()));
  for (int i = 0; i < 10; ++i) torch::relu(x);
  ASSERT_TRUE(agent->Flush(20000));
  const Counters c = agent->GetCounters();
  agent->Close();
  EXPECT_TRUE(server.hello_accepts_batches());
  EXPECT_EQ(c.sent, 10u);
  EXPECT_EQ(server.batches_sent(), 2u);
  EXPECT_EQ(c.verdicts, 10u);
  EXPECT_EQ(c.pass, 10u);
  EXPECT_EQ(c.unreadable, 2u);
  common::AgentConfig one_by_one = Config(server.port());
  one_by_one.parity.sender.batch_calls = 1;
  one_by_one.parity.sender.flush_timeout_ms = 200;  // its one verdict stays held for a batch of 5
  auto second = StartAgent(one_by_one);
  torch::relu(x);
  second->Close();
  EXPECT_FALSE(server.hello_accepts_batches());
}

// The nice value and name of each thread of this process (Linux: /proc/self/task).
struct ThreadNice {
  std::string name;
  int nice = 0;
};
std::vector<ThreadNice> Threads() {
  std::vector<ThreadNice> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream stat(task.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    // After the name: state, then 15 fields up to priority; the 17th is the nice value.
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    for (int i = 0; i < 17 && fields >> field; ++i) {
    }
    out.push_back({text.substr(open + 1, close - open - 1), std::stoi(field)});
  }
  return out;
}

// parity.background_nice: the sender thread ("parity-sender") and the gRPC threads that ran the
// stream's reactions run that much nicer than the training; the training's own thread is left
// alone. 0 leaves a new sender at the training's priority.
TEST(SessionTest, TheAgentsThreadsRunBelowTheTraining) {
  const int base = ThisThreadNice();
  if (base > 12) {
    GTEST_SKIP() << "this test runs at nice " << base;
  }
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.link.background_nice = 7;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  ASSERT_TRUE(agent->Flush(20000));
  int senders = 0, lowered = 0;
  for (const ThreadNice& t : Threads()) {
    if (t.name == "parity-sender") {
      ++senders;
      EXPECT_EQ(t.nice, base + 7);
    }
    if (t.nice == base + 7) ++lowered;
  }
  EXPECT_EQ(senders, 1);
  EXPECT_GE(lowered, 2) << "the sender and at least one thread that ran a stream reaction";
  EXPECT_EQ(ThisThreadNice(), base) << "the training's thread keeps its priority";
  agent->Close();
  config.parity.link.background_nice = 0;
  auto second = StartAgent(config);
  TrainStep(w, torch::randn({3, 4}));
  ASSERT_TRUE(second->Flush(20000));
  for (const ThreadNice& t : Threads()) {
    if (t.name == "parity-sender") {
      EXPECT_EQ(t.nice, base);
    }
  }
  second->Close();
}

// A server that accepts the stream but never answers: under `drop` the training never waits,
// and close() gives up after flush_timeout_ms, counting what it could not send.
TEST(SessionTest, AWedgedServerNeverHangsTheTrainingUnderDrop) {
  RecordingServer server(0, "", /*workers=*/1);
  common::AgentConfig config = Config(server.port());
  config.parity.sender.policy = common::QueuePolicy::kDrop;
  config.parity.sender.queue_max_calls = 8;
  config.parity.sender.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  ASSERT_TRUE(agent->Flush(20000));  // connected
  server.Wedge();
  // Megabyte tensors, so that the server's queue, the HTTP/2 window and the agent's queue fill.
  torch::Tensor w = torch::randn({512, 1024}, torch::requires_grad());
  const torch::Tensor x = torch::randn({256, 1024});
  RunWithHangDetector(std::chrono::seconds(60), [&] {
    for (int step = 0; step < 20; ++step) {
      TrainStep(w, x);
      agent->Step(nullptr);
    }
  });
  RunWithHangDetector(std::chrono::seconds(60), [&] { agent->Close(); });
  const Counters c = agent->GetCounters();
  EXPECT_GT(c.dropped.at("queue_full"), 0u);
  // Still queued for the connected, wedged server when the flush ran out: stopped.
  EXPECT_GT(c.dropped.at("stopped"), 0u);
  EXPECT_EQ(c.dropped.at("disconnected"), 0u);
  ExpectEveryCallAccountedFor(c);
  server.Release();
}

// Under `block`, block_timeout_ms bounds each wait, and the breaker bounds them all: one wait runs
// out per congestion, not one per call, and the training finishes against a wedged server. Against
// a wedged server with a 1 s timeout and room for 4 calls, 5 steps (~50 calls) wait about one
// timeout in all; without the breaker each call past the first 4 would wait its second (40 s and
// more: the bound below is far from either). Once the server is back and the queue has drained,
// calls wait for room again: none more is dropped.
TEST(SessionTest, ABlockWaitThatRunsOutShedsCallsUntilTheQueueDrains) {
  RecordingServer server(0, "", /*workers=*/1);
  common::AgentConfig config = Config(server.port());
  config.parity.sender.queue_max_calls = 4;
  config.parity.sender.block_timeout_ms = 1000;
  config.parity.sender.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  ASSERT_TRUE(agent->Flush(20000));
  server.Wedge();
  torch::Tensor w = torch::randn({512, 1024}, torch::requires_grad());
  RunWithHangDetector(std::chrono::seconds(120), [&] {
    for (int step = 0; step < 5; ++step) {
      TrainStep(w, torch::randn({256, 1024}));
      agent->Step(nullptr);
    }
  });
  const Counters wedged = agent->GetCounters();
  const uint64_t shed = wedged.dropped.at("queue_full");
  EXPECT_GT(shed, 10u) << "the calls after the wait that ran out were not dropped";
  EXPECT_GE(wedged.blocked_seconds, 0.9) << "no wait ran out";
  EXPECT_LT(wedged.blocked_seconds, 10.0) << "waits ran out call after call";
  server.Release();
  ASSERT_TRUE(agent->Flush(60000));  // the queue drained: the congestion is over
  for (int step = 0; step < 2; ++step) {
    TrainStep(w, torch::randn({256, 1024}));
    agent->Step(nullptr);
  }
  ASSERT_TRUE(agent->Flush(60000));
  const Counters after = agent->GetCounters();
  EXPECT_EQ(after.dropped.at("queue_full"), shed) << "still shedding after the queue drained";
  EXPECT_GT(after.verdicts, wedged.verdicts);
  ::testing::internal::CaptureStderr();
  agent->Close();
  const std::string exit_lines = ::testing::internal::GetCapturedStderr();
  // The exit line says what was not checked, and why (common/naming/drop_reasons.h).
  EXPECT_THAT(exit_lines,
              ::testing::HasSubstr(absl::StrCat("not checked: ", shed,
                                                " calls (queue_full): the server fell behind the "
                                                "training")))
      << exit_lines;
  ExpectEveryCallAccountedFor(agent->GetCounters());
}

// The breaker re-arms at the server's pace: after a stall trips it, a server that takes calls
// again, but more slowly than the training makes them, never lets the queue drain to half (the
// sender takes one call at a time here, as it takes one batch at a time from a long queue).
// Before, every call after the stall was then dropped as queue_full for the rest of the run;
// now, once the server has taken its share of calls since the trip, calls wait for room again,
// and the training goes at the server's pace without dropping.
TEST(SessionTest, TheBreakerReArmsOnceAStalledServerMovesAgainAtItsOwnPace) {
  RecordingServer server(0, "", /*workers=*/1);
  common::AgentConfig config = Config(server.port());
  config.parity.sender.queue_max_calls = 8;
  config.parity.sender.batch_calls = 1;
  config.parity.sender.block_timeout_ms = 1000;
  config.parity.sender.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  ASSERT_TRUE(agent->Flush(20000));
  // Fresh 64 KiB tensors: two calls an iteration, made much faster than the paced server takes
  // them, and large enough that the transport's buffers fill within a few hundred calls.
  const auto calls = [](int n) {
    for (int i = 0; i < n; ++i) torch::randn({128, 128}).add(1.0);
  };
  server.Wedge();
  RunWithHangDetector(std::chrono::seconds(120), [&] { calls(300); });
  const uint64_t stalled = agent->GetCounters().dropped.at("queue_full");
  ASSERT_GT(stalled, 0u) << "the stall did not trip the breaker";
  server.SetPace(std::chrono::milliseconds(5));
  server.Release();
  ::testing::internal::CaptureStderr();
  uint64_t settled = 0;  // dropped once the server has moved for a while
  RunWithHangDetector(std::chrono::seconds(120), [&] {
    // The training goes on while the server works off what the stall left in the transport,
    // until it has taken 32 calls more (ReArmCalls(): 16 for this queue).
    const uint64_t sent = agent->GetCounters().sent;
    while (agent->GetCounters().sent < sent + 32) calls(10);
    settled = agent->GetCounters().dropped.at("queue_full");
    calls(300);
  });
  const std::string lines = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(agent->GetCounters().dropped.at("queue_full"), settled)
      << "still dropping while the server takes calls at its pace\n"
      << lines;
  EXPECT_THAT(lines, ::testing::HasSubstr("calls wait for room again")) << lines;
  ASSERT_TRUE(agent->Flush(60000));
  ExpectEveryCallAccountedFor(agent->GetCounters());
  agent->Close();
}

// The end of the session takes flush_timeout_ms and little more, even while connection
// attempts to a server that is gone would each wait out their connect timeout.
TEST(SessionTest, CloseIsBoundedByTheFlushTimeoutWhenTheServerIsGone) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.sender.policy = common::QueuePolicy::kDrop;
  config.parity.link.connect_timeout_ms = 20000;
  config.parity.sender.flush_timeout_ms = 1000;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const std::chrono::milliseconds took = TimeOf([&] { agent->Close(); });
  EXPECT_LT(took.count(), 1000 + 3000) << "close() waited out a connection attempt";
  const Counters c = agent->GetCounters();
  // Never sent for want of a server: disconnected, as docs/troubleshooting.md's table says, not
  // stopped (a connected server's flush running out).
  EXPECT_GT(c.dropped.at("disconnected"), 0u);
  EXPECT_EQ(c.dropped.at("stopped"), 0u);
  ExpectEveryCallAccountedFor(c);
}

// A tls_path that cannot be used is a configuration error: the session is not created, and
// the message names the key and what is missing.
TEST(SessionTest, UnusableTlsFilesAreAConfigurationError) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.link.plaintext = false;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/nonexistent/parity-tls", "not a directory"},
      {parity::testing::MakeTempDir("parity_no_ca_"), "ca.crt"}};
  for (const auto& [dir, why] : cases) {
    config.tls_path = dir;
    parity_host host{};
    host.size = sizeof(host);
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(config, host);
    ASSERT_FALSE(session.ok()) << dir;
    EXPECT_THAT(
        std::string(session.status().message()),
        ::testing::AllOf(::testing::StartsWith("tensor.tls_path: "), ::testing::HasSubstr(why),
                         ::testing::HasSubstr("parity.plaintext")))
        << session.status();
  }
}

// Nothing can be delivered (ca.crt gone after the session was made): the end of the session
// does not wait.
TEST(SessionTest, CloseDoesNotWaitWhenNothingCanBeDelivered) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.link.plaintext = false;
  parity::testing::TlsPeerPki pki;
  config.tls_path = pki.agent_dir;
  config.parity.sender.flush_timeout_ms = 60000;
  auto agent = MakeAgent(config);
  ASSERT_NE(agent, nullptr);
  std::filesystem::remove(pki.agent_dir + "/ca.crt");
  agent->Start();
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const std::chrono::milliseconds took = TimeOf([&] { agent->Close(); });
  EXPECT_LT(took.count(), 10000) << "close() waited for a delivery that could not happen";
  ExpectEveryCallAccountedFor(agent->GetCounters());
}

// Calls written to a stream whose server dies before answering are lost in flight: counted,
// so that captured = verdicts + dropped + lost.
TEST(SessionTest, CallsWrittenToAStreamThatDiesAreCountedAsLost) {
  auto server = std::make_unique<GarbledServer>("", /*answer_calls=*/false);
  common::AgentConfig config = Config(server->port());
  config.parity.sender.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (server->calls_received() < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_GE(server->calls_received(), 5u);
  server.reset();  // dies with every call unanswered
  agent->Close();
  const Counters c = agent->GetCounters();
  EXPECT_GE(c.lost_in_flight, 5u);
  EXPECT_EQ(c.verdicts, 0u);
  ExpectEveryCallAccountedFor(c);
}

}  // namespace
}  // namespace parity::agent
