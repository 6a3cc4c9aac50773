// A small, thread-safe logger for Parity's own messages (stderr, one line each, with time and
// level). Debian's Abseil predates absl/log, and the agent must not touch the host's glog.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace parity::common {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the process-wide threshold and the prefix ("parity-server", "parity-agent").
void SetLogLevel(LogLevel level);
bool ParseLogLevel(absl::string_view text, LogLevel* out);
void SetLogPrefix(absl::string_view prefix);

// Writes one line if `level` is at or above the threshold. Thread-safe; never throws.
void Log(LogLevel level, absl::string_view message);

inline void LogInfo(absl::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(absl::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(absl::string_view m) { Log(LogLevel::kError, m); }

// Lets one message through per interval and counts the rest: for errors that may repeat per call.
class RateLimiter {
 public:
  explicit RateLimiter(std::chrono::milliseconds interval) : interval_(interval) {}
  // True when a message may be logged now; `*suppressed` gets how many were held back since.
  bool Allow(uint64_t* suppressed);

 private:
  const std::chrono::milliseconds interval_;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace parity::common
