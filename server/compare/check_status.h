// What a check decided about an output or a call: the server's own status type. The Verdict
// proto's VerdictStatus is written from it in one place (server/call/verdict_encoder.cc), and
// the result files and metrics name it themselves (StatusText, ServerMetrics::VerdictLabel).
// Torch-free, proto-free.
#pragma once

#include <cstdint>

namespace parity::server {

enum class CheckStatus : uint8_t {
  kUnspecified,
  kPass,     // "pass"
  kWarning,  // "Warning"
  kError,    // "error": out of the standard's bounds
  kSkip,     // "SKIP": not checked (the message says why)
  kRejected  // the call broke a rule of the protocol or a limit: not checked
};

}  // namespace parity::server
