#include "common/base/log.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/base/text.h"

namespace parity::common {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
ABSL_CONST_INIT absl::Mutex g_mu(absl::kConstInit);  // usable before static initialisation
std::string& Prefix() {
  static std::string* prefix = new std::string("parity");  // never destroyed: logs at exit
  return *prefix;
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    default:
      return "ERROR";
  }
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool ParseLogLevel(absl::string_view text, LogLevel* out) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    std::string name = LevelName(l);
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    if (text == name) {
      *out = l;
      return true;
    }
  }
  return false;
}

void SetLogPrefix(absl::string_view prefix) {
  absl::MutexLock lock(&g_mu);
  Prefix() = std::string(prefix);
}

void Log(LogLevel level, absl::string_view message) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  // One record per call: a message's own newlines start indented continuation lines (a table),
  // and every other control character is escaped, so no text inside a message (a client's
  // hostname, say) can begin a line that looks like a record of its own.
  std::string body;
  body.reserve(message.size());
  bool first = true;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    if (!first) body += "\n    ";
    first = false;
    body += EscapeControl(line);
  }
  absl::MutexLock lock(&g_mu);
  const std::string line =
      absl::StrCat("[", Prefix(), " ", when, " ", LevelName(level), "] ", body, "\n");
  // write(2), not stdio: safe to call late in process exit and never interleaved mid-line.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

bool RateLimiter::Allow(uint64_t* suppressed) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_ns_.load();
  if (now >= next &&
      next_ns_.compare_exchange_strong(next, now + std::chrono::nanoseconds(interval_).count())) {
    *suppressed = suppressed_.exchange(0);
    return true;
  }
  suppressed_.fetch_add(1);
  return false;
}

}  // namespace parity::common
