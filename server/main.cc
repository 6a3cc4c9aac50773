// parity-server: flags and/or a msprobe-style config.json in, a running server out.
// Precedence: built-in defaults < --config file < flags given on the command line.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_tuning.h"
#include "common/log.h"
#include "server/metrics.h"
#include "server/server.h"

ABSL_FLAG(std::string, config, "",
          "msprobe-style config.json (task \"run_ut\", run_ut.host/port/rank_list/tls_path/"
          "white_list/black_list, plus a \"parity\" section); see docs/configuration.md");
ABSL_FLAG(std::string, host, "", "address to listen on (default 0.0.0.0; 127.0.0.1 in plaintext)");
ABSL_FLAG(int64_t, port, 59208, "gRPC port; 0 picks a free one (printed at start-up)");
ABSL_FLAG(std::string, tls_path, "",
          "directory with server.crt and server.key; a ca.crt there turns on mutual TLS");
ABSL_FLAG(bool, plaintext, false,
          "serve without TLS (binds to loopback unless --allow_plaintext_non_loopback)");
ABSL_FLAG(bool, allow_plaintext_non_loopback, false,
          "allow plaintext on a non-loopback address (training data travels unencrypted)");
ABSL_FLAG(std::string, output_dir, "./", "directory for the result CSVs and the JSON-lines file");
ABSL_FLAG(std::string, metrics_host, "0.0.0.0", "address of the Prometheus endpoint");
ABSL_FLAG(int64_t, metrics_port, 9464, "Prometheus /metrics port; 0 = a free one, -1 = off");
ABSL_FLAG(int32_t, workers, 0, "replay workers (0 = 2 on CUDA, up to 4 on CPU)");
ABSL_FLAG(std::string, bench_device, "auto", "bench device: auto (CUDA when present), cpu, cuda:N");
ABSL_FLAG(bool, golden, true, "replay a float64 CPU golden for the three-way standards");
ABSL_FLAG(std::string, standards_file, "",
          "API -> standard table and thresholds (default: the table built into the server)");
ABSL_FLAG(std::string, rank_list, "", "comma-separated ranks this server checks (default all)");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(bool, replay, true,
          "replay and judge calls; false: receive and decode them but answer every call SKIP "
          "(to test connectivity or measure the agent and the transport alone; no result files)");
ABSL_FLAG(bool, check_config, false,
          "read the config file and flags, report any error, print the effective settings "
          "and exit (exit status 0 when valid)");
ABSL_FLAG(bool, list_metrics, false,
          "print every metric the server exports (name, type, labels, meaning; tab-separated) "
          "and exit");
ABSL_FLAG(std::string, port_file, "",
          "write \"<grpc port> <metrics port>\" here once listening (for scripts using port 0)");

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace {

// The flags named on the command line (Debian's Abseil keeps IsSpecifiedOnCommandLine private),
// so that a flag overrides the config file only when the user gave it.
std::vector<std::string>& GivenFlags() {
  static std::vector<std::string> given;
  return given;
}

void RecordGivenFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (!absl::ConsumePrefix(&a, "--") && !absl::ConsumePrefix(&a, "-")) continue;
    a = a.substr(0, a.find('='));
    GivenFlags().emplace_back(a);
    if (absl::ConsumePrefix(&a, "no")) GivenFlags().emplace_back(a);  // --noplaintext
  }
}

bool Given(const char* name) {
  for (const std::string& g : GivenFlags()) {
    if (g == name) return true;
  }
  return false;
}

int Fail(const absl::Status& s) {
  parity::common::LogError(s.ToString());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Parity benchmark server: replays operator calls streamed by Parity agents and judges "
      "them.\n  parity-server --tls_path=certs/ --output_dir=results/\n  parity-server "
      "--config=config.json\n  parity-server --plaintext --port=0 --port_file=ports.txt");
  absl::FlagsUsageConfig usage;
  // --help lists this file's flags (Abseil's default looks for a file named like the program).
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  // Named from the source tree's root, not the build machine's checkout.
  usage.normalize_filename = [](absl::string_view file) {
    const size_t at = file.rfind("server/main.cc");
    return std::string(at == absl::string_view::npos ? file : file.substr(at));
  };
  usage.version_string = [] { return std::string("parity-server " PARITY_VERSION "\n"); };
  absl::SetFlagsUsageConfig(usage);
  RecordGivenFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  parity::common::SetLogPrefix("parity-server");
  if (absl::GetFlag(FLAGS_list_metrics)) {
    for (const parity::server::MetricInfo& m : parity::server::MetricCatalogue()) {
      std::printf("%s\t%s\t%s\t%s\n", m.name, m.type, m.labels, m.help);
    }
    return 0;
  }
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);
  parity::common::LogLevel level;
  if (!parity::common::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--log_level: expected debug, info, warning or error, got \"",
                     absl::GetFlag(FLAGS_log_level), "\"")));
  }
  parity::common::SetLogLevel(level);

  parity::common::ServerConfig config;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    auto parsed = parity::common::LoadServerConfig(absl::GetFlag(FLAGS_config));
    if (!parsed.ok()) return Fail(parsed.status());
    for (const std::string& w : parsed->warnings) parity::common::LogWarning(w);
    config = std::move(parsed->config);
  }
  auto& o = config.parity;
  if (Given("host")) config.host = absl::GetFlag(FLAGS_host);
  if (Given("port")) config.port = absl::GetFlag(FLAGS_port);
  if (Given("tls_path")) config.tls_path = absl::GetFlag(FLAGS_tls_path);
  if (Given("plaintext")) o.plaintext = absl::GetFlag(FLAGS_plaintext);
  if (Given("allow_plaintext_non_loopback")) {
    o.allow_plaintext_non_loopback = absl::GetFlag(FLAGS_allow_plaintext_non_loopback);
  }
  if (Given("output_dir")) o.output_dir = absl::GetFlag(FLAGS_output_dir);
  if (Given("metrics_host")) o.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  if (Given("metrics_port")) o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (Given("workers"))
    o.workers = static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_workers)));
  if (Given("bench_device")) o.bench_device = absl::GetFlag(FLAGS_bench_device);
  if (Given("golden")) o.golden = absl::GetFlag(FLAGS_golden);
  if (Given("standards_file")) o.standards_file = absl::GetFlag(FLAGS_standards_file);
  if (Given("rank_list")) {
    config.rank_list.clear();
    for (absl::string_view r :
         absl::StrSplit(absl::GetFlag(FLAGS_rank_list), ',', absl::SkipWhitespace())) {
      int64_t v;
      if (!absl::SimpleAtoi(r, &v) || v < 0) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--rank_list: \"", r, "\" is not a rank (a non-negative integer)")));
      }
      config.rank_list.push_back(v);
    }
  }

  if (absl::GetFlag(FLAGS_check_config)) {
    auto checked = parity::server::ParityServer::Create(config);
    if (!checked.ok()) return Fail(checked.status());
    std::printf("configuration OK\n%s\n", (*checked)->Describe().c_str());
    return 0;
  }

  // Signals are taken by a sigwait below, so block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  parity::server::CallHandler handler;
  if (!absl::GetFlag(FLAGS_replay)) {
    handler = [](const parity::server::CallOrigin&, const parity::v1::ApiCall& call,
                 const parity::server::BlobStore&) {
      parity::v1::Verdict v;
      v.set_sequence(call.sequence());
      v.set_api_name(absl::StrCat(call.op_name(), ".", call.call_index()));
      v.set_phase(call.phase());
      v.set_step(call.step());
      v.set_status(parity::v1::VERDICT_STATUS_SKIP);
      v.set_message("not replayed: parity-server --replay=false");
      return v;
    };
    parity::common::LogWarning("--replay=false: calls are received but not checked");
  }
  auto server = parity::server::ParityServer::Create(config, std::move(handler));
  if (!server.ok()) return Fail(server.status());
  parity::common::LogInfo(absl::StrCat("configuration:\n", (*server)->Describe()));
  if (absl::Status s = (*server)->Start(); !s.ok()) return Fail(s);
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    const std::string path = absl::GetFlag(FLAGS_port_file);
    const std::string tmp = path + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d %d\n", (*server)->port(), (*server)->metrics_port());
      std::fclose(f);
      std::rename(tmp.c_str(), path.c_str());  // readers never see a half-written file
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  parity::common::LogInfo(absl::StrCat("signal ", sig, ": finishing open streams"));
  (*server)->Shutdown(std::chrono::seconds(10));
  for (const std::string& p : (*server)->ResultPaths()) {
    parity::common::LogInfo(absl::StrCat("results: ", p));
  }
  return 0;
}
