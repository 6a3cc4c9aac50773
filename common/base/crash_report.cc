#include "common/base/crash_report.h"

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace parity::common {

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  // The handler restores the default action and raises the signal again: the process dies as
  // it would have (core dump, exit status), after the report. parity-server blocks SIGTERM and
  // SIGINT and takes them with sigwait (a clean shutdown), so they never reach it.
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
}

}  // namespace parity::common
