// docs/configuration.md's key tables made from the key tables (common/config/config_keys.cc,
// server/config/server_keys.cc): each key is described once, in its row there, and the docs and
// --help print that description. ctest config_docs fails when the docs' tables are not exactly
// what this writes.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/config/config.h"

namespace parity::common {
namespace {

bool Unlisted(const KeyDescription& k) { return k.kind == "accepted"; }
bool Inert(const KeyDescription& k) { return k.kind == "ignored" || k.kind == "accepted"; }

std::string TypeCell(const KeyDescription& k) {
  if (!k.docs_type.empty()) return k.docs_type;
  if (Inert(k)) return "—";
  if (k.kind == "choice" && !k.choices.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& c : k.choices) quoted.push_back(absl::StrCat("`\"", c, "\"`"));
    return absl::StrJoin(quoted, ", ");
  }
  if (k.kind == "list of indices") return "list";
  return k.kind;
}

// 134217728 -> "128MiB"; a size that is no whole number of KiB stays in bytes.
std::string SizeText(const std::string& bytes) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(bytes, &n) || n == 0) return bytes;
  constexpr const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - i));
    if (n % unit == 0) return absl::StrCat(n / unit, kUnits[i]);
  }
  return bytes;
}

std::string DefaultCell(const KeyDescription& k) {
  if (!k.docs_default.empty()) return k.docs_default;
  if (Inert(k) || !k.shown) return "—";
  if (k.kind == "string" || k.kind == "choice") return absl::StrCat("`\"", k.default_value, "\"`");
  if (k.kind == "size") return absl::StrCat("`", SizeText(k.default_value), "`");
  if (k.kind == "list of indices" || k.kind == "list of strings") {
    return absl::StrCat("`", absl::StrReplaceAll(k.default_value, {{" (all)", ""}}), "`");
  }
  return absl::StrCat("`", k.default_value, "`");
}

std::string Table(const std::vector<KeyDescription>& keys, const std::string& side,
                  const std::string& which, bool parity_section) {
  std::string out =
      absl::StrCat("<!-- parity-server --config_docs: ", side, " ", which,
                   " keys -->\n\n| key | type | default | meaning |\n|---|---|---|---|\n");
  for (const KeyDescription& k : keys) {
    if (Unlisted(k) || (k.path.rfind("parity.", 0) == 0) != parity_section) continue;
    // An ignored key's text is the warning's why.
    const std::string meaning =
        k.kind == "ignored" ? absl::StrCat("accepted with a warning, no effect: ", k.doc) : k.doc;
    absl::StrAppend(&out, "| `", k.path, "` | ", TypeCell(k), " | ", DefaultCell(k), " | ",
                    absl::StrReplaceAll(meaning, {{"|", "\\|"}}), " |\n");
  }
  return out;
}

// `[text](target)` -> "text"; `code` and **strong** marks dropped.
std::string PlainText(const std::string& markdown) {
  std::string out;
  for (std::size_t i = 0; i < markdown.size(); ++i) {
    const char c = markdown[i];
    if (c == '`') continue;
    if (c == '*' && i + 1 < markdown.size() && markdown[i + 1] == '*') {
      ++i;
      continue;
    }
    if (c == '[') {  // a link: its text, without the target
      const std::size_t close = markdown.find(']', i + 1);
      if (close != std::string::npos && close + 1 < markdown.size() && markdown[close + 1] == '(') {
        const std::size_t end = markdown.find(')', close + 2);
        if (end != std::string::npos) {
          out += PlainText(markdown.substr(i + 1, close - i - 1));
          i = end;
          continue;
        }
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string ConfigDocsMarkdown(const std::vector<KeyDescription>& agent,
                               const std::vector<KeyDescription>& server) {
  return absl::StrCat(
      Table(agent, "agent", "msprobe", false), "\n", Table(agent, "agent", "parity", true), "\n",
      Table(server, "server", "msprobe", false), "\n", Table(server, "server", "parity", true));
}

std::string KeyDocAsText(const std::string& doc, std::size_t indent, std::size_t width) {
  const std::string pad(indent, ' ');
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(PlainText(doc), ' ', absl::SkipEmpty())) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, pad, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, pad, line, "\n");
  return out;
}

}  // namespace parity::common
