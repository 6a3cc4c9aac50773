#include "common/base/crash_report.h"

#include <link.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace parity::common {
namespace {

// The program's load bias, formatted when the handler is installed (nothing is formatted in
// the handler): a PIE program's addresses in the report minus this are the ones addr2line takes,
// so a stack the symbolizer could only attribute to the nearest symbol can be resolved after.
char g_bias_line[160];

int FirstObject(dl_phdr_info* info, size_t, void*) {
  std::snprintf(g_bias_line, sizeof(g_bias_line),
                "*** program load bias 0x%lx: addr2line -f -C -e PROGRAM (ADDRESS - bias)\n",
                static_cast<unsigned long>(info->dlpi_addr));
  return 1;  // the first object is the program itself
}

// absl writes the report to stderr itself and hands each piece here too; nullptr ends it.
void Write(const char* data) {
  static volatile sig_atomic_t written = 0;
  if (data != nullptr || written) return;
  written = 1;
  const char* text = g_bias_line;
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  dl_iterate_phdr(FirstObject, nullptr);
  // The handler restores the default action and raises the signal again: the process dies as
  // it would have (core dump, exit status), after the report. parity-server blocks SIGTERM and
  // SIGINT and takes them with sigwait (a clean shutdown), so they never reach it.
  absl::FailureSignalHandlerOptions options;
  options.writerfn = Write;
  absl::InstallFailureSignalHandler(options);
}

}  // namespace parity::common
