#include "common/config/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config/config_keys.h"
#include "common/config/config_reader.h"
#include "common/config/config_table.h"
#include "common/naming/selection.h"

namespace parity::common {

// Parses the document; a syntax error becomes an INVALID_ARGUMENT naming line and column.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source) {
  try {
    nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end());
    if (!doc.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the top level must be a JSON object, got ", Quote(doc)));
    }
    return doc;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into line:column.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const std::size_t pos = what.find("syntax error");
    if (pos != std::string::npos) what = what.substr(pos);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ":", col, ": invalid JSON: ", what));
  }
}

namespace {

// "tensor.port: ..." ending " (line 7)" when the message names a key of the file and the
// reader has not already placed it.
std::string WithLine(const ConfigIssues& issues, const std::string& message) {
  const std::size_t colon = message.find(": ");
  if (colon == std::string::npos) return message;
  const std::size_t placed = message.rfind(" (line ");
  if (placed != std::string::npos && absl::EndsWith(message, ")") &&
      message.find_first_not_of("0123456789", placed + 7) == message.size() - 1) {
    return message;
  }
  auto it = issues.lines.find(message.substr(0, colon));
  if (it == issues.lines.end()) return message;
  return absl::StrCat(message, " (line ", it->second, ")");
}

}  // namespace

absl::Status Summarise(const ConfigIssues& issues, absl::string_view source) {
  if (issues.errors.empty()) return absl::OkStatus();
  // Every problem at once: the warnings too (a mistyped key is often why a value is missing).
  std::vector<std::string> lines;
  for (const std::string& e : issues.errors) lines.push_back(WithLine(issues, e));
  for (const std::string& w : issues.warnings) lines.push_back("also: " + WithLine(issues, w));
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", issues.errors.size(),
                                                 " error(s):\n  ", absl::StrJoin(lines, "\n  ")));
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    uint64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30},   {"tib", 1ull << 40},
      {"kb", 1000ull},     {"mb", 1000000ull},  {"gb", 1000000000ull}, {"b", 1ull},
  };
  uint64_t factor = 1;
  for (const Unit& u : kUnits) {
    const std::size_t n = std::strlen(u.suffix);
    if (s.size() > n && s.compare(s.size() - n, n, u.suffix) == 0) {
      factor = u.factor;
      s = std::string(absl::StripAsciiWhitespace(s.substr(0, s.size() - n)));
      break;
    }
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(s, &value) || (value != 0 && factor > UINT64_MAX / value)) {
    return absl::InvalidArgumentError(absl::StrCat("not a byte size: \"", text, "\""));
  }
  return value * factor;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat(path, ": ", why));
    return absl::UnavailableError(absl::StrCat(path, ": ", why));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- agent -------------------------------------------------------------------------------------

void CheckNames(absl::string_view key, const std::vector<std::string>& names, bool substrings,
                std::vector<std::string>& errors) {
  absl::StatusOr<NameList> list = NameList::Parse(names, substrings);
  if (!list.ok()) errors.push_back(absl::StrCat(key, ": ", list.status().message()));
}

absl::Status ValidateAgentConfig(const AgentConfig& c) {
  std::vector<std::string> errors;
  if (c.host.empty()) {
    errors.push_back("tensor.host: the benchmark server's address is required");
  } else if (c.host.find_first_of(" \t\n") != std::string::npos) {
    errors.push_back(absl::StrCat("tensor.host: not a host name or address: \"", c.host, "\""));
  }
  if (c.port == -1) {
    errors.push_back("tensor.port: the benchmark server's port is required (1-65535)");
  } else if (c.port < 1 || c.port > 65535) {
    errors.push_back(absl::StrCat("tensor.port: must be between 1 and 65535, got ", c.port));
  }
  if (c.tls_path.empty() && !c.parity.link.plaintext) {
    errors.push_back(
        "tensor.tls_path: TLS is required. Point tls_path at a folder holding ca.crt (and "
        "client.crt, client.key for mutual TLS), or set parity.plaintext to true to send "
        "unencrypted (msprobe took an empty tls_path to mean plaintext; Parity asks explicitly)");
  }
  if (!c.scope.empty() && !c.list.empty()) {
    errors.push_back("tensor.scope, tensor.list: set one of them, not both");
  }
  if (!c.scope.empty() && c.scope.size() != 2) {
    errors.push_back(
        absl::StrCat("tensor.scope: expected a range of two API names [start, end], got ",
                     c.scope.size(), " names"));
  }
  CheckNames("tensor.scope", c.scope, false, errors);
  CheckNames("tensor.list", c.list, true, errors);
  CheckNames("parity.white_list", c.parity.white_list, false, errors);
  CheckNames("parity.black_list", c.parity.black_list, false, errors);
  if (c.parity.link.reconnect_initial_ms > c.parity.link.reconnect_max_ms) {
    errors.push_back("parity.reconnect_initial_ms: must not exceed parity.reconnect_max_ms");
  }
  if (c.parity.link.max_inline_tensor_bytes > c.parity.link.max_tensor_bytes) {
    errors.push_back("parity.max_inline_tensor_bytes: must not exceed parity.max_tensor_bytes");
  }
  for (const std::string& what : c.parity.replicas) {
    if (what != "gradients" && what != "parameters" && what != "collectives") {
      errors.push_back(absl::StrCat("parity.replicas: \"", what,
                                    "\" is none of gradients, parameters, collectives"));
    }
  }
  if (!c.parity.capture.check_calls && c.parity.replicas.empty()) {
    errors.push_back(
        "parity.check_calls: false with parity.replicas empty would check nothing: set "
        "parity.replicas, or leave check_calls on");
  }
  if (c.parity.sender.queue_max_bytes == 0 || c.parity.sender.queue_max_calls == 0) {
    errors.push_back("parity.queue_max_bytes, parity.queue_max_calls: must be positive");
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n  "));
}

absl::StatusOr<nlohmann::json> FlagJson(KeyKind kind, const std::string& flag_name,
                                        const std::string& path,
                                        const std::optional<std::string>& value) {
  const std::string flag = absl::StrCat("--", flag_name, " (", path, ")");
  switch (kind) {
    case KeyKind::kBool:
      if (!value || *value == "true" || *value == "1") return nlohmann::json(true);
      if (*value == "false" || *value == "0") return nlohmann::json(false);
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected true or false, got \"", *value, "\""));
    case KeyKind::kInteger: {
      int64_t i = 0;
      if (value && absl::SimpleAtoi(*value, &i)) return nlohmann::json(i);
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected an integer, got \"", value.value_or(""), "\""));
    }
    case KeyKind::kNumber: {
      double d = 0;
      if (value && absl::SimpleAtod(*value, &d)) return nlohmann::json(d);
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected a number, got \"", value.value_or(""), "\""));
    }
    case KeyKind::kStringList:
    case KeyKind::kIndexList: {
      nlohmann::json list = nlohmann::json::array();
      for (absl::string_view item : absl::StrSplit(value.value_or(""), ',', absl::SkipEmpty())) {
        int64_t i = 0;
        if (kind == KeyKind::kIndexList && absl::SimpleAtoi(item, &i)) {
          list.push_back(i);
        } else {
          list.push_back(std::string(absl::StripAsciiWhitespace(item)));
        }
      }
      return list;
    }
    default:
      if (!value) return absl::InvalidArgumentError(absl::StrCat(flag, ": needs a value"));
      return nlohmann::json(*value);
  }
}

// Sets `doc`'s value at the dotted `path`, creating sections (a non-object in the way is
// replaced: the flag wins over the file).
void SetAt(nlohmann::json& doc, const std::string& path, nlohmann::json value) {
  nlohmann::json* at = &doc;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!at->is_object()) *at = nlohmann::json::object();
    at = &(*at)[std::string(part)];
  }
  *at = std::move(value);
}

const char* KeyKindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kBool:
      return "bool";
    case KeyKind::kInteger:
      return "integer";
    case KeyKind::kBytes:
      return "size";
    case KeyKind::kNumber:
      return "number";
    case KeyKind::kString:
      return "string";
    case KeyKind::kChoice:
      return "choice";
    case KeyKind::kStringList:
      return "list of strings";
    case KeyKind::kIndexList:
      return "list of indices";
    case KeyKind::kIgnored:
      return "ignored";
    case KeyKind::kAccepted:
      return "accepted";
  }
  return "?";
}

std::vector<KeyDescription> AgentKeys() { return AgentTable().Descriptions(); }

absl::StatusOr<Parsed<AgentConfig>> ParseAgentConfig(absl::string_view json_text,
                                                     absl::string_view source) {
  absl::StatusOr<nlohmann::json> doc = ParseJson(json_text, source);
  if (!doc.ok()) return doc.status();
  Parsed<AgentConfig> out;
  ConfigIssues issues;
  issues.lines = KeyLines(json_text);
  if (!doc->contains("tensor")) {
    issues.errors.push_back("tensor: section missing: it holds host, port and tls_path");
  }
  AgentTable().Read(*doc, out.config, issues);
  // The cross-field rules too, every problem at once: but not again for a key already in error
  // (its value was left at its default: "required" would only repeat it).
  std::set<std::string> wrong;
  for (const std::string& e : issues.errors) wrong.insert(e.substr(0, e.find_first_of(" :")));
  if (absl::Status v = ValidateAgentConfig(out.config); !v.ok()) {
    for (absl::string_view e : absl::StrSplit(v.message(), "\n  ")) {
      const std::string key(e.substr(0, e.find_first_of(" :,")));
      const std::string section = key.substr(0, key.find('.'));
      if (wrong.count(key) == 0 && wrong.count(section) == 0) issues.errors.emplace_back(e);
    }
  }
  const nlohmann::json* tensor = doc->contains("tensor") ? &(*doc)["tensor"] : nullptr;
  const bool tls_path_given = tensor != nullptr && tensor->is_object() &&
                              tensor->contains("tls_path") && (*tensor)["tls_path"].is_string() &&
                              !(*tensor)["tls_path"].get<std::string>().empty();
  if (out.config.parity.link.plaintext && tls_path_given) {
    issues.warnings.push_back(WithLine(
        issues,
        "parity.plaintext: true, so tensor.tls_path is not used: the agent connects without TLS, "
        "and a server that has TLS refuses every call (drop one of the two)"));
  }
  if (absl::Status s = Summarise(issues, source); !s.ok()) return s;
  out.warnings = std::move(issues.warnings);
  return out;
}

absl::StatusOr<Parsed<AgentConfig>> LoadAgentConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseAgentConfig(*text, path);
}

std::string DescribeAgentConfig(const AgentConfig& c) { return AgentTable().Describe(c); }

std::string AgentConfigDigest(const AgentConfig& config) {
  AgentConfig c = config;
  c.parity.run_id.clear();  // differs by design between runs, not between ranks of a run
  const std::string text = DescribeAgentConfig(c);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xF]);
  }
  return out;
}

}  // namespace parity::common
