// A fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTRAP, an unblocked SIGTERM) prints
// the crashing thread's stack, symbolized, to stderr before the process dies as it would have. For
// Parity's own executables only: never the agent, a guest in the training's process whose signal
// handlers belong to the training.
#pragma once

namespace parity::common {

// Call first thing in main(); `argv0` lets the symbolizer find the executable.
void InstallCrashReport(const char* argv0);

}  // namespace parity::common
