#include "common/base/text.h"

#include "absl/strings/str_cat.h"

namespace parity::common {

std::string EscapeControl(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7F) {
      out.push_back(ch);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string Printable(absl::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return EscapeControl(text);
  std::size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes so that the cut keeps whole characters.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(EscapeControl(text.substr(0, cut)), "...(", text.size(), " bytes)");
}

}  // namespace parity::common
