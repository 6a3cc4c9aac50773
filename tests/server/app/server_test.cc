// The server over real gRPC on loopback: mutual TLS, real calls of 30+ ops, result files,
// metrics, protocol errors and malformed calls on one stream while others keep being served,
// chunked tensors, and back-pressure when the work queue is full.
#include "server/app/server.h"
#include "parity/v1/parity.pb.h"

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/naming/api_names.h"
#include "common/naming/naming.h"
#include "common/torch/generator_read.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "common/transport/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/call/verdict_encoder.h"
#include "server/compare/judge.h"
#include "server/replay/call_checker.h"
#include "server/results/result_writer.h"
#include "tests/testing/op_cases.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace parity::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::R;
using testing::Stack;
using ::testing::StartsWith;
using testing::TestStream;

// Certificates made once per test program: a CA, a server and a client signed by it.
struct Pki {
  testing::KeyPair ca = testing::MakeCa("Parity Test CA");
  testing::KeyPair server = testing::MakeLeaf(ca, {"localhost", -1, 30});
  testing::KeyPair client = testing::MakeLeaf(ca, {"rank0", -1, 30});
  std::string server_dir, client_dir;
  Pki() {
    const std::string root = testing::MakeTempDir("parity_pki_");
    server_dir = testing::WriteTlsDir(root + "/server", ca.cert_pem, server, {});
    client_dir = testing::WriteTlsDir(root + "/client", ca.cert_pem, {}, client);
  }
};
const Pki& TestPki() {
  static const Pki* pki = new Pki();
  return *pki;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(server::ServerConfig config, CallHandler handler = {}) {
    auto s = ParityServer::Create(config, std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  void StartMutualTls() {
    output_dir_ = testing::MakeTempDir("parity_out_");
    StartServer(testing::TestServerConfig(output_dir_, TestPki().server_dir));
  }
  std::shared_ptr<grpc::Channel> Channel(const std::string& tls_dir) {
    return testing::TestChannel(server_->port(), tls_dir);
  }

  std::string output_dir_;
  std::unique_ptr<ParityServer> server_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out = absl::StrSplit(text, "\r\n", absl::SkipEmpty());
  return out;
}

// The first line starting with `prefix` (rows follow completion order across workers).
std::string RowStarting(const std::vector<std::string>& rows, const std::string& prefix) {
  for (const std::string& r : rows) {
    if (absl::StartsWith(r, prefix)) return r;
  }
  return "";
}

std::string FileMatching(const std::string& dir, const std::string& prefix) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (absl::StartsWith(e.path().filename().string(), prefix)) return e.path().string();
  }
  return "";
}

TEST_F(ServerTest, ChecksRealCallsOverMutualTlsAndPublishesFilesAndMetrics) {
  StartMutualTls();
  TestStream stream(Channel(TestPki().client_dir));
  ASSERT_TRUE(stream.Hello(3)) << stream.status().error_message();
  EXPECT_EQ(stream.server_info().protocol_version(), 1u);
  EXPECT_EQ(stream.server_info().bench_device(), "cpu");
  // The bench's libtorch, which decides whether a random op replays bit for bit.
  EXPECT_EQ(stream.server_info().torch_version(), common::TorchVersion());
  EXPECT_FALSE(stream.server_info().torch_version().empty());

  std::vector<v1::ApiCall> calls;
  std::set<std::string> ops;
  uint64_t seq = 0;
  for (const testing::OpCase& c : testing::CleanCases()) {
    calls.push_back(testing::BuildCall(c.name, c.overload, c.args(), c.phase, nullptr, ++seq));
    calls.back().set_call_index(0);
    ops.insert(c.name);
  }
  // One planted harmful fault: gelu evaluated with the tanh approximation.
  const at::Tensor x = R({16, 32}, 1) * 3;
  calls.push_back(testing::BuildCall(
      "aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD,
      [&](Stack& out) { out[0] = at::gelu(x, "tanh"); }, ++seq));
  calls.back().set_call_index(7);
  calls.back().set_module_path("model.mlp.act");
  ASSERT_GE(ops.size(), 30u);

  int outputs = 0;
  for (const v1::ApiCall& c : calls) ASSERT_TRUE(stream.SendCall(c));
  for (const v1::ApiCall& c : calls) {
    v1::ServerMessage m;
    ASSERT_TRUE(stream.Read(&m));
    ASSERT_TRUE(m.has_verdict());
    EXPECT_EQ(m.verdict().sequence(), c.sequence()) << "verdicts come back in send order";
    const bool fault = c.call_index() == 7;
    EXPECT_EQ(StatusText(FromProto(m.verdict().status())), fault ? "error" : "pass")
        << m.verdict().ShortDebugString();
    outputs += m.verdict().outputs_size();
  }
  EXPECT_TRUE(stream.Close().ok()) << stream.status().error_message();

  // Metrics, scraped over HTTP as Prometheus would.
  auto scrape = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  int forward = 0, backward = 0;
  for (const testing::OpCase& c : testing::CleanCases()) {
    (c.phase == v1::PHASE_BACKWARD ? backward : forward)++;
  }
  EXPECT_THAT(*scrape, HasSubstr(absl::StrCat(
                           "parity_server_calls_checked_total{phase=\"forward\",verdict=\"pass\"} ",
                           forward)));
  EXPECT_THAT(
      *scrape,
      HasSubstr(absl::StrCat(
          "parity_server_calls_checked_total{phase=\"backward\",verdict=\"pass\"} ", backward)));
  EXPECT_THAT(*scrape, HasSubstr("parity_server_calls_checked_total{phase=\"forward\",verdict="
                                 "\"error\"} 1"));
  EXPECT_THAT(*scrape, HasSubstr("parity_server_op_errors_total{op=\"aten::gelu\"} 1"));
  EXPECT_THAT(*scrape,
              HasSubstr(absl::StrCat("parity_server_replay_seconds_count ", calls.size())));
  EXPECT_THAT(*scrape, HasSubstr("parity_build_info{"));

  // The four CSVs and the JSON-lines record, for rank 3, flushed as the verdicts went out.
  server_->Shutdown();
  const std::string details = FileMatching(output_dir_, "accuracy_checking_details_");
  ASSERT_FALSE(details.empty());
  EXPECT_THAT(details, ::testing::EndsWith("_rank3.csv"));
  std::vector<std::string> rows = Lines(testing::ReadAll(details));
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(outputs) + 1);
  EXPECT_THAT(rows[0], StartsWith("\xEF\xBB\xBF"
                                  "API Name,Bench Dtype,DEVICE Dtype,Shape,"));
  // msprobe's names; "Bench Dtype" is what the device output was compared against: the golden.
  EXPECT_THAT(
      RowStarting(rows, "Functional.gelu.7."),
      StartsWith("Functional.gelu.7.forward.output.0,torch.float64,torch.float32,\"(16, 32)\","));
  const std::string result = FileMatching(output_dir_, "api_precision_compare_result_");
  rows = Lines(testing::ReadAll(result));
  std::set<std::string> apis;  // one result row per API (two overloads of an op share one)
  for (const v1::ApiCall& c : calls) apis.insert(common::MsprobeCsvName(c));
  ASSERT_EQ(rows.size(), apis.size() + 1);
  EXPECT_THAT(RowStarting(rows, "Functional.gelu.7,"), StartsWith("Functional.gelu.7,error, ,"));
  const std::string jsonl = FileMatching(output_dir_, "parity_results_");
  std::vector<std::string> records =
      absl::StrSplit(testing::ReadAll(jsonl), '\n', absl::SkipEmpty());
  ASSERT_EQ(records.size(), calls.size());
  const std::string gelu = RowStarting(records, "{\"api\":\"aten::gelu.7\"");
  EXPECT_THAT(gelu, HasSubstr("\"module_path\":\"model.mlp.act\""));
  EXPECT_THAT(gelu, HasSubstr("\"rank\":3"));
  EXPECT_THAT(gelu, HasSubstr("\"status\":\"error\""));
}

// run_ut.white_list and black_list on the server: a call outside the white list, or in the
// black list, is answered SKIP with the reason and its identity (module path too), unchecked.
TEST_F(ServerTest, TheServersWhiteAndBlackListsSkipCallsWithTheirReason) {
  output_dir_ = testing::MakeTempDir("parity_out_");
  server::ServerConfig config = testing::TestServerConfig(output_dir_, TestPki().server_dir);
  config.check.white_list = {"gelu", "relu"};
  config.check.black_list = {"relu"};
  StartServer(config);
  TestStream stream(Channel(TestPki().client_dir));
  ASSERT_TRUE(stream.Hello(0)) << stream.status().error_message();
  const at::Tensor x = R({4, 8}, 1);
  std::vector<v1::ApiCall> calls = {
      testing::BuildCall("aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD, nullptr, 1),
      testing::BuildCall("aten::relu", "", {x}, v1::PHASE_FORWARD, nullptr, 2),
      testing::BuildCall("aten::sigmoid", "", {x}, v1::PHASE_FORWARD, nullptr, 3)};
  for (v1::ApiCall& c : calls) {
    c.set_module_path("model.block");
    c.set_step(5);
    ASSERT_TRUE(stream.SendCall(c));
  }
  std::vector<v1::Verdict> verdicts;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    v1::ServerMessage m;
    ASSERT_TRUE(stream.Read(&m));
    ASSERT_TRUE(m.has_verdict());
    verdicts.push_back(m.verdict());
  }
  EXPECT_TRUE(stream.Close().ok()) << stream.status().error_message();
  EXPECT_EQ(StatusText(FromProto(verdicts[0].status())), "pass") << verdicts[0].ShortDebugString();
  EXPECT_GT(verdicts[0].outputs_size(), 0);
  for (const auto& [i, why] : {std::pair{1, "in the server's black_list"},
                               std::pair{2, "not in the server's white_list"}}) {
    const v1::Verdict& v = verdicts[static_cast<std::size_t>(i)];
    EXPECT_EQ(v.status(), v1::VERDICT_STATUS_SKIP) << v.ShortDebugString();
    EXPECT_EQ(v.message(), why);
    EXPECT_EQ(v.sequence(), calls[static_cast<std::size_t>(i)].sequence());
    EXPECT_EQ(v.api_name(), common::ApiName(calls[static_cast<std::size_t>(i)]));
    EXPECT_EQ(v.step(), 5);
    EXPECT_EQ(v.module_path(), "model.block");
    EXPECT_EQ(v.op_name(), calls[static_cast<std::size_t>(i)].op_name());
    EXPECT_EQ(v.outputs_size(), 0) << "not checked";
  }
}

// Mutual TLS: a client without a valid certificate never gets a stream. The handshake lets it
// finish; its stream is refused with UNAUTHENTICATED and the reason, counted by cause from zero,
// and logged naming the peer once a minute per host and cause (issue 66: refused in the
// handshake, it got UNAVAILABLE with no reason and the server counted and named nothing).
TEST_F(ServerTest, MutualTlsRefusesClientsWithoutAValidCertificate) {
  StartMutualTls();
  const std::string root = testing::MakeTempDir("parity_bad_clients_");
  const std::string& ca = TestPki().ca.cert_pem;
  testing::KeyPair other_ca = testing::MakeCa("Some Other CA");
  auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok());
  for (const char* cause : {"no_client_certificate", "unknown_ca", "expired", "revoked"}) {
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("parity_server_tls_refusals_total{cause=\"", cause,
                                              "\"} 0")));
  }
  // A raw gRPC client: the agent itself refuses to load an expired certificate.
  auto stream_with = [&](const testing::KeyPair& client) {
    grpc::SslCredentialsOptions raw;
    raw.pem_root_certs = ca;
    raw.pem_cert_chain = client.cert_pem;
    raw.pem_private_key = client.key_pem;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return std::make_unique<TestStream>(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::SslCredentials(raw), args));
  };
  // Captured from before the first stream: the server refuses a stream as it starts.
  ::testing::internal::CaptureStderr();
  const std::vector<std::tuple<std::string, std::unique_ptr<TestStream>, std::string>> cases = [&] {
    std::vector<std::tuple<std::string, std::unique_ptr<TestStream>, std::string>> v;
    v.emplace_back(
        "no_client_certificate",
        std::make_unique<TestStream>(Channel(testing::WriteTlsDir(root + "/none", ca, {}, {}))),
        "no client certificate: this server requires one signed by its ca.crt");
    v.emplace_back("unknown_ca", stream_with(testing::MakeLeaf(other_ca, {"rank0", -1, 30})),
                   "it is not signed by the CA this server trusts (its ca.crt)");
    v.emplace_back("expired", stream_with(testing::MakeLeaf(TestPki().ca, {"rank0", -10, -1})),
                   "certificate has expired: renew it");
    return v;
  }();
  for (const auto& [cause, stream, why] : cases) {
    SCOPED_TRACE(cause);
    EXPECT_FALSE(stream->Hello());
    EXPECT_EQ(stream->status().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(stream->status().error_message(), HasSubstr(why));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const auto& [cause, stream, why] : cases) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("refused a stream from ipv4:127.0.0.1:")));
    EXPECT_THAT(log, HasSubstr(absl::StrCat(" (", cause, "): "))) << log;
  }
  text = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok());
  for (const auto& [cause, stream, why] : cases) {
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("parity_server_tls_refusals_total{cause=\"", cause,
                                              "\"} 1")));
  }
  // The good client still gets through.
  TestStream good(Channel(TestPki().client_dir));
  EXPECT_TRUE(good.Hello()) << good.status().error_message();
  EXPECT_TRUE(good.Close().ok());
}

// What the agent's own diagnosis names when its connection fails: the server's side of TLS
// (the client's certificate is the server's to refuse, with the reason, above).
TEST_F(ServerTest, RefusedTlsConnectionsAreDiagnosedInWords) {
  StartMutualTls();
  const std::string root = testing::MakeTempDir("parity_diagnose_");
  testing::KeyPair other_ca = testing::MakeCa("Some Other CA");
  auto diagnose = [&](const std::string& dir, const std::string& name = "localhost",
                      int port = -1) {
    return common::DiagnoseTlsConnection("127.0.0.1", port < 0 ? server_->port() : port, dir, name,
                                         5000);
  };
  EXPECT_EQ(diagnose(TestPki().client_dir), "");
  EXPECT_THAT(
      diagnose(testing::WriteTlsDir(root + "/wrong_ca", other_ca.cert_pem, {}, TestPki().client)),
      HasSubstr("the server's certificate is not trusted"));
  // Both names: the one dialled and the ones the certificate carries, and the setting.
  EXPECT_THAT(diagnose(TestPki().client_dir, "parity.example.com"),
              AllOf(HasSubstr("the server's certificate names \"localhost\""),
                    HasSubstr(", not \"parity.example.com\": set parity.server_name to \"")));
  // Nothing listening, and a plaintext server where TLS was expected.
  const int closed_port = server_->port();
  server_->Shutdown(std::chrono::seconds(1));
  EXPECT_THAT(diagnose(TestPki().client_dir, "localhost", closed_port),
              HasSubstr("Connection refused (is parity-server running on that port?)"));
  server::ServerConfig plain = testing::TestServerConfig(output_dir_, "");
  StartServer(plain);
  EXPECT_THAT(diagnose(TestPki().client_dir), HasSubstr("does not speak TLS on this port"));
}

// libtorch's intra-op threads: its own choice, but at most the cores divided among the workers,
// unless set; so the workers' replays together ask for no more threads than the host has.
TEST(ServerThreadsTest, IntraOpThreadsAreAtMostTheCoresDividedAmongTheWorkers) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // libtorch's choice as it was before any server of this process (earlier tests) set it.
  const int own = LibtorchDefaultIntraOpThreads();
  ASSERT_GE(own, 1);
  for (const auto& [workers, set, expected] : std::vector<std::tuple<uint32_t, uint32_t, int>>{
           {1, 0, std::min(own, cores)},
           {2, 0, std::min(own, std::max(1, cores / 2))},
           {2, 3, 3},
           {1, 1, 1},
           {1, 0, std::min(own, cores)}}) {
    server::ServerConfig config = testing::TestServerConfig(testing::MakeTempDir("t_"), "");
    config.parity.workers = workers;
    config.parity.intra_op_threads = set;
    auto s = ParityServer::Create(config);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(IntraOpThreads(), expected) << workers << " workers, intra_op_threads " << set;
  }
}

TEST_F(ServerTest, BadServerConfigurationIsAClearStartupError) {
  const std::string out = testing::MakeTempDir("parity_out_");
  const std::string root = testing::MakeTempDir("parity_bad_server_");
  server::ServerConfig c = testing::TestServerConfig(out, root + "/missing");
  auto s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("not a directory"));
  // An expired server certificate.
  c.tls_path = testing::WriteTlsDir(root + "/expired", TestPki().ca.cert_pem,
                                    testing::MakeLeaf(TestPki().ca, {"localhost", -10, -1}), {});
  s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("server.crt: certificate expired"));
  // A key that belongs to another certificate.
  testing::KeyPair a = testing::MakeLeaf(TestPki().ca, {"localhost", -1, 30});
  testing::KeyPair b = testing::MakeLeaf(TestPki().ca, {"localhost", -1, 30});
  c.tls_path = testing::WriteTlsDir(root + "/mixed", "", {a.cert_pem, b.key_pem}, {});
  s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("does not belong to the certificate"));
  // An operator catalogue that does not parse, or reclassifies a built-in operator.
  c = testing::TestServerConfig(out, "");
  c.parity.operator_catalogue = root + "/catalogue.json";
  std::ofstream(c.parity.operator_catalogue) << R"({"random": {"normal": ["relu"], "x": ["a"]}})";
  s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("catalogue.json: random.x: no such family"));
  std::ofstream(c.parity.operator_catalogue) << R"({"never_replayed": {"junk": ["dropout"]}})";
  s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("classifies differently"));
  // Plaintext on a routable address needs a second, explicit opt-in.
  c = testing::TestServerConfig(out, "");
  c.host = "0.0.0.0";
  s = ParityServer::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("allow_plaintext_non_loopback"));
}

TEST_F(ServerTest, ABusyPortIsAStartupErrorNotASharedPort) {
  StartMutualTls();
  server::ServerConfig c = testing::TestServerConfig(testing::MakeTempDir("o_"), "");
  c.port = server_->port();
  auto second = ParityServer::Create(c);
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("port in use"));
}

TEST_F(ServerTest, ProtocolErrorsEndOnlyTheirStream) {
  output_dir_ = testing::MakeTempDir("parity_out_");
  StartServer(testing::TestServerConfig(output_dir_, ""));
  auto channel = Channel("");
  TestStream good(channel);
  ASSERT_TRUE(good.Hello());

  TestStream old_agent(channel);
  EXPECT_FALSE(old_agent.Hello(0, 99));
  EXPECT_EQ(old_agent.status().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(old_agent.status().error_message(), HasSubstr("unsupported protocol version 99"));

  TestStream no_hello(channel);
  ASSERT_TRUE(no_hello.SendCall(
      testing::BuildCall("aten::relu", "", {R({3}, 1)}, v1::PHASE_FORWARD, nullptr, 1)));
  EXPECT_EQ(no_hello.Close().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(no_hello.status().error_message(), HasSubstr("first message must be Hello"));

  TestStream bad_chunk(channel);
  ASSERT_TRUE(bad_chunk.Hello());
  v1::AgentMessage chunk;
  chunk.mutable_chunk()->set_blob_id(1);
  chunk.mutable_chunk()->set_total_bytes(8);
  chunk.mutable_chunk()->set_offset(4);  // the first chunk must start at 0
  chunk.mutable_chunk()->set_data("abcd");
  ASSERT_TRUE(bad_chunk.Send(chunk));
  EXPECT_EQ(bad_chunk.Close().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_chunk.status().error_message(), HasSubstr("expected 0"));

  TestStream empty(channel);
  ASSERT_TRUE(empty.Hello());
  ASSERT_TRUE(empty.Send(v1::AgentMessage()));
  EXPECT_EQ(empty.Close().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A message over the server's cap is refused by gRPC itself.
  TestStream huge(channel);
  ASSERT_TRUE(huge.Hello());
  v1::ApiCall big =
      testing::BuildCall("aten::relu", "", {R({3}, 1)}, v1::PHASE_FORWARD, nullptr, 1);
  big.mutable_inputs(0)->mutable_tensor()->mutable_data()->assign(65 << 20, 'x');
  huge.SendCall(big);
  EXPECT_EQ(huge.Close().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // The first stream never noticed.
  ASSERT_TRUE(good.SendCall(
      testing::BuildCall("aten::relu", "", {R({3}, 1)}, v1::PHASE_FORWARD, nullptr, 1)));
  v1::ServerMessage m;
  ASSERT_TRUE(good.Read(&m));
  EXPECT_EQ(StatusText(FromProto(m.verdict().status())), "pass");
  EXPECT_TRUE(good.Close().ok());
}

// Bytes that are not an AgentMessage end their stream with INVALID_ARGUMENT naming the message,
// after the verdicts of the calls before it and with none for calls after it. Both paths: bytes
// that look like an ApiCall (parsed by a worker) and bytes that do not (parsed on reading).
TEST_F(ServerTest, UndecodableMessagesEndTheirStreamAfterTheCallsBeforeThem) {
  StartServer(testing::TestServerConfig(testing::MakeTempDir("o_"), ""));
  auto channel = Channel("");
  TestStream other(channel);
  ASSERT_TRUE(other.Hello());
  // Field 2 (call), 5 bytes: field 12 (inputs) claims 16 bytes and has 3.
  const std::string looks_like_a_call(
      "\x12\x05\x62\x10"
      "abc",
      7);
  const std::string garbage(7, '\xff');
  for (const std::string& bad : {looks_like_a_call, garbage}) {
    TestStream s(channel);
    ASSERT_TRUE(s.Hello());
    for (int i = 1; i <= 2; ++i) {
      ASSERT_TRUE(s.SendCall(
          testing::BuildCall("aten::relu", "", {R({8}, i)}, v1::PHASE_FORWARD, nullptr, i)));
    }
    ASSERT_TRUE(s.SendBytes(bad));
    // May already be refused: the server stops reading at the bad message.
    s.SendCall(testing::BuildCall("aten::relu", "", {R({8}, 3)}, v1::PHASE_FORWARD, nullptr, 3));
    s.WritesDone();
    for (int i = 1; i <= 2; ++i) {
      v1::ServerMessage m;
      ASSERT_TRUE(s.Read(&m));
      EXPECT_EQ(m.verdict().sequence(), static_cast<uint64_t>(i));
      EXPECT_EQ(m.verdict().status(), v1::VERDICT_STATUS_PASS);
    }
    v1::ServerMessage after;
    EXPECT_FALSE(s.Read(&after)) << after.DebugString();
    const grpc::Status status = s.Close();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr("message 4 on this stream (7 bytes) is not a valid "
                          "parity.v1.AgentMessage"));
  }
  // The other stream is still served.
  ASSERT_TRUE(other.SendCall(
      testing::BuildCall("aten::relu", "", {R({8}, 9)}, v1::PHASE_FORWARD, nullptr, 9)));
  v1::ServerMessage m;
  ASSERT_TRUE(other.Read(&m));
  EXPECT_EQ(m.verdict().sequence(), 9u);
  EXPECT_TRUE(other.Close().ok());
}

TEST_F(ServerTest, MalformedCallsGetClearVerdictsWhileOtherStreamsAreServed) {
  output_dir_ = testing::MakeTempDir("parity_out_");
  StartServer(testing::TestServerConfig(output_dir_, ""));
  auto channel = Channel("");
  const v1::ApiCall good =
      testing::BuildCall("aten::add", "Tensor", {R({2, 3}, 1), R({2, 3}, 2), 1});
  struct Bad {
    std::function<void(v1::ApiCall&)> spoil;
    const char* status;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {[](v1::ApiCall& c) { c.mutable_inputs(0)->mutable_tensor()->mutable_data()->pop_back(); },
       "SKIP", "inputs[0].tensor.data: expected 24 bytes"},
      {[](v1::ApiCall& c) {
         c.mutable_inputs(1)->mutable_tensor()->set_shape(0, int64_t{1} << 40);
       },
       "SKIP", "inputs[1]"},
      {[](v1::ApiCall& c) { c.set_op_name("aten::no_such_op"); }, "SKIP",
       "unknown operator \"aten::no_such_op\""},
      {[](v1::ApiCall& c) { c.set_overload("Bogus"); }, "SKIP", "no overload \"Bogus\""},
      {[](v1::ApiCall& c) { c.mutable_inputs(1)->set_string_value("oops"); }, "SKIP",
       "arguments do not match aten::add.Tensor"},
      // A number that is no DType, where the call's autocast dtype goes (a tensor's is refused
      // the same way).
      {[](v1::ApiCall& c) { c.set_autocast_dtype(static_cast<v1::DType>(99)); }, "SKIP",
       "ApiCall.autocast_dtype: 99 is not a parity.v1.DType"},
      // The call site's API names result rows: no control characters.
      {[](v1::ApiCall& c) {
         c.set_api(
             "Tensor.\x01"
             "add");
       },
       "SKIP", "ApiCall.api: \"Tensor.\\x01add\" holds control characters"},
  };
  TestStream faulty(channel), healthy(channel);
  ASSERT_TRUE(faulty.Hello(0));
  ASSERT_TRUE(healthy.Hello(1));
  uint64_t seq = 0;
  for (const Bad& b : bad) {
    v1::ApiCall c = good;
    c.set_sequence(++seq);
    b.spoil(c);
    ASSERT_TRUE(faulty.SendCall(c));
    v1::ApiCall ok = good;
    ok.set_sequence(seq);
    ASSERT_TRUE(healthy.SendCall(ok));
  }
  for (const Bad& b : bad) {
    v1::ServerMessage m;
    ASSERT_TRUE(faulty.Read(&m));
    EXPECT_THAT(m.verdict().message(), HasSubstr(b.message)) << m.verdict().ShortDebugString();
    EXPECT_NE(m.verdict().status(), v1::VERDICT_STATUS_PASS);
    ASSERT_TRUE(healthy.Read(&m));
    EXPECT_EQ(StatusText(FromProto(m.verdict().status())), "pass");
  }
  EXPECT_TRUE(faulty.Close().ok());
  EXPECT_TRUE(healthy.Close().ok());
}

// A chunked tensor: the payload travels in TensorChunk messages before its call.
class ChunkSink : public common::BlobSink {
 public:
  uint64_t AddBlob(std::string_view payload) override {
    blobs.emplace_back(++next, std::string(payload));
    return next;
  }
  std::vector<std::pair<uint64_t, std::string>> blobs;
  uint64_t next = 0;
};

TEST_F(ServerTest, ReassemblesChunkedTensors) {
  output_dir_ = testing::MakeTempDir("parity_out_");
  StartServer(testing::TestServerConfig(output_dir_, ""));
  TestStream stream(Channel(""));
  ASSERT_TRUE(stream.Hello());
  const at::Tensor x = R({256, 64}, 3);  // 64 KiB
  v1::ApiCall call;
  call.set_op_name("aten::relu");
  call.set_sequence(1);
  ChunkSink sink;
  common::EncodeOptions opts;
  opts.max_inline_tensor_bytes = 1024;
  opts.blob_sink = &sink;
  ASSERT_TRUE(common::EncodeValue(x, nullptr, opts, "in", call.add_inputs()).ok());
  ASSERT_TRUE(common::EncodeValue(at::relu(x), nullptr, opts, "out", call.add_outputs()).ok());
  ASSERT_EQ(sink.blobs.size(), 2u);
  for (const auto& [id, payload] : sink.blobs) {
    for (std::size_t off = 0; off < payload.size(); off += 10000) {
      v1::AgentMessage m;
      m.mutable_chunk()->set_blob_id(id);
      m.mutable_chunk()->set_total_bytes(payload.size());
      m.mutable_chunk()->set_offset(off);
      m.mutable_chunk()->set_data(payload.substr(off, 10000));
      ASSERT_TRUE(stream.Send(m));
    }
  }
  ASSERT_TRUE(stream.SendCall(call));
  v1::ServerMessage m;
  ASSERT_TRUE(stream.Read(&m));
  EXPECT_EQ(StatusText(FromProto(m.verdict().status())), "pass") << m.verdict().ShortDebugString();
  EXPECT_TRUE(stream.Close().ok());
}

// With one worker stuck and room for one queued call, the stream reads exactly one more call
// and then nothing: the rest wait in gRPC's flow-control window and the agent's socket, not in
// server memory. Releasing the worker delivers every verdict, in order.
TEST_F(ServerTest, FullQueueStopsReadingInsteadOfBuffering) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int started = 0;
  CallHandler handler = [&](const CallOrigin&, const parity::server::ServerCall&,
                            const parity::common::BlobSource&) {
    std::unique_lock<std::mutex> lock(mu);
    ++started;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return released; });
    parity::server::CallOutcome check;
    check.status = parity::server::CheckStatus::kPass;
    return check;
  };
  server::ServerConfig config = testing::TestServerConfig(testing::MakeTempDir("o_"), "");
  config.parity.workers = 1;
  config.parity.queue_max_calls = 1;
  StartServer(config, handler);
  TestStream stream(Channel(""));
  ASSERT_TRUE(stream.Hello());
  constexpr int kCalls = 40;
  std::thread writer([&] {
    for (int i = 1; i <= kCalls; ++i) {
      v1::ApiCall c =
          testing::BuildCall("aten::relu", "", {R({64, 64}, i)}, v1::PHASE_FORWARD, nullptr, i);
      if (!stream.SendCall(c)) break;
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return started == 1; }));
  }
  // Call 1 runs, call 2 is queued, call 3 is parked: the stream then stops reading. Wait (with a
  // deadline, no sleep) for the parked call, then check the server read nothing more.
  auto scrape_received = [&] {
    auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
    return text.ok() &&
           absl::StrContains(*text, "parity_server_calls_received_total{phase=\"forward\"} 3");
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool three = false;
  while (!(three = scrape_received()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(three);
  auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("parity_server_queue_calls 2"));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(started, 1);
    released = true;
  }
  cv.notify_all();
  writer.join();
  for (int i = 1; i <= kCalls; ++i) {
    v1::ServerMessage m;
    ASSERT_TRUE(stream.Read(&m));
    EXPECT_EQ(m.verdict().sequence(), static_cast<uint64_t>(i));
  }
  EXPECT_TRUE(stream.Close().ok());
  text = testing::HttpGet(server_->metrics_port(), "/metrics");
  EXPECT_THAT(*text, HasSubstr(absl::StrCat(
                         "parity_server_calls_received_total{phase=\"forward\"} ", kCalls)));
}

TEST_F(ServerTest, RanksOutsideTheRankListAreRefused) {
  server::ServerConfig config = testing::TestServerConfig(testing::MakeTempDir("o_"), "");
  config.service.rank_list = {0, 1};
  StartServer(config);
  TestStream other(Channel(""));
  EXPECT_FALSE(other.Hello(5));
  EXPECT_EQ(other.status().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  TestStream mine(Channel(""));
  EXPECT_TRUE(mine.Hello(1));
  EXPECT_TRUE(mine.Close().ok());
}

}  // namespace
}  // namespace parity::server
