// Client-supplied text made safe to print: control characters escaped (a hostname with a newline
// must not forge a log line or a CSV row) and length capped.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace parity::common {

// `text` with every control character (bytes 0x00-0x1F and 0x7F) written as an escape: "\n",
// "\r", "\t", or "\xNN". Other bytes, UTF-8 included, are kept. Thread-safe.
std::string EscapeControl(absl::string_view text);

// EscapeControl(text), cut to at most `max_bytes` bytes of the original with "...(N bytes)"
// appended when longer (the cut never splits a UTF-8 sequence).
std::string Printable(absl::string_view text, std::size_t max_bytes = 256);

}  // namespace parity::common
