// parity-server: a command line and/or a msprobe-style config.json in, a running server out.
// The flags come from the configuration key table (server/app/command_line.h).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/crash_report.h"
#include "common/base/log.h"
#include "common/transport/grpc_tuning.h"
#include "server/app/command_line.h"
#include "server/app/server.h"
#include "server/call/verdict_encoder.h"
#include "server/metrics/metrics.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace {

using parity::common::LogError;
using parity::common::LogInfo;

int Fail(const absl::Status& s) {
  LogError(s.ToString());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// Prints the configuration keys as tab-separated rows: path, flag, type, default, meaning.
void ListConfig() {
  for (const parity::common::KeyDescription& k : parity::server::ServerKeys()) {
    std::printf("%s\t%s\t%s\t%s\t%s\n", k.path.c_str(), k.flag.c_str(), k.kind.c_str(),
                k.default_value.c_str(), k.doc.c_str());
  }
}

// Writes "<grpc port> <metrics port>" atomically: readers never see a half-written file.
void WritePortFile(const std::string& path, int port, int metrics_port) {
  const std::string tmp = path + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d %d\n", port, metrics_port);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

// The handler of --replay=false: every call is received and decoded, none is checked.
parity::server::CallHandler SkipEverything() {
  return [](const parity::server::CallOrigin&, const parity::server::ServerCall& call,
            const parity::common::BlobSource&) {
    parity::server::CallOutcome skipped;
    skipped.status = parity::server::CheckStatus::kSkip;
    skipped.message = "not replayed: parity-server --replay=false";
    return skipped;
  };
}

// --help, --version, --list_metrics, --list_config, --config_docs: the page printed, true.
bool PrintedAnInfoPage(const parity::server::CommandLine& line) {
  if (line.help) {
    std::fputs(parity::server::HelpText().c_str(), stdout);
  } else if (line.version) {
    std::printf("parity-server %s\n", PARITY_VERSION);
  } else if (line.list_metrics) {
    for (const parity::server::MetricInfo& m : parity::server::MetricCatalogue()) {
      std::printf("%s\t%s\t%s\t%s\n", m.name, m.type, m.labels, m.help);
    }
  } else if (line.list_config) {
    ListConfig();
  } else if (line.config_docs) {
    std::fputs(parity::common::ConfigDocsMarkdown(parity::common::AgentKeys(),
                                                  parity::server::ServerKeys())
                   .c_str(),
               stdout);
  } else {
    return false;
  }
  return true;
}

// After signal `sig`: open streams finish within `grace`. The shutdown always ends: streams are
// cancelled after the grace period, and if something still holds the server 10 s later (a
// wedged replay), the process exits anyway; the result rows are written as each call is
// checked, so nothing checked is lost.
// The watchdog is an alarm, not a thread: a thread started here could not be created under an
// address-space limit (std::system_error, then abort).
void ShutdownOverdue(int) {
  static const char kText[] =
      "[parity-server] ERROR shutdown did not finish in time: exiting with calls still being "
      "checked\n";
  (void)!write(STDERR_FILENO, kText, sizeof(kText) - 1);
  _exit(3);
}

void ShutDown(parity::server::ParityServer& server, int sig, std::chrono::milliseconds grace) {
  LogInfo(
      absl::StrCat("signal ", sig, ": finishing open streams (at most ", grace.count(), " ms)"));
  struct sigaction overdue = {};
  overdue.sa_handler = ShutdownOverdue;
  sigaction(SIGALRM, &overdue, nullptr);
  alarm(static_cast<unsigned>(
      (grace + std::chrono::seconds(10) + std::chrono::seconds(1) - std::chrono::milliseconds(1)) /
      std::chrono::seconds(1)));
  server.Shutdown(grace);
  for (const std::string& p : server.ResultPaths()) LogInfo(absl::StrCat("results: ", p));
}

}  // namespace

int main(int argc, char** argv) {
  parity::common::InstallCrashReport(argv[0]);
  parity::common::SetLogPrefix("parity-server");
  auto line = parity::server::ParseCommandLine(argc, argv);
  if (!line.ok()) return Fail(line.status());
  if (PrintedAnInfoPage(*line)) return 0;
  auto parsed = parity::server::LoadConfiguration(*line);
  if (!parsed.ok()) {
    // Whatever is wrong (a key, a file that cannot be read): with --check_config, exit 2 as
    // documented (docs/configuration.md); else the start failed (1).
    const int failed = Fail(parsed.status());
    return line->check_config ? 2 : failed;
  }
  const parity::server::ServerConfig& config = parsed->config;
  parity::common::LogLevel level = parity::common::LogLevel::kInfo;
  parity::common::ParseLogLevel(config.parity.log_level, &level);  // a checked choice
  parity::common::SetLogLevel(level);
  for (const std::string& w : parsed->warnings) parity::common::LogWarning(w);
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);

  if (line->check_config) {
    // Whatever is wrong (a key, a certificate that cannot be read): not valid, exit 2.
    auto checked = parity::server::ParityServer::Create(config);
    if (!checked.ok()) {
      Fail(checked.status());
      return 2;
    }
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
  if (!config.parity.replay) {
    handler = SkipEverything();
    parity::common::LogWarning("--replay=false: calls are received but not checked");
  }
  auto server = parity::server::ParityServer::Create(config, std::move(handler));
  if (!server.ok()) return Fail(server.status());
  LogInfo(absl::StrCat("configuration:\n", (*server)->Describe()));
  if (absl::Status s = (*server)->Start(); !s.ok()) return Fail(s);
  if (!line->port_file.empty()) {
    WritePortFile(line->port_file, (*server)->port(), (*server)->metrics_port());
  }
  int sig = 0;
  sigwait(&signals, &sig);
  ShutDown(**server, sig, std::chrono::milliseconds(config.parity.shutdown_grace_ms));
  return 0;
}
