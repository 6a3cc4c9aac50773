#include "common/config/config_reader.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/config.h"

namespace parity::common {

namespace {

std::string TypeName(const nlohmann::json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "list";
  if (v.is_object()) return "object";
  return "null";
}

}  // namespace

std::map<std::string, int> KeyLines(absl::string_view text) {
  struct Frame {
    bool object = false;
    bool expect_key = false;
    std::string key;
  };
  std::map<std::string, int> lines;
  // A config on one line (made in code: a merged dict, a command line) has no lines to name.
  if (text.find('\n') == absl::string_view::npos) return lines;
  std::vector<Frame> stack;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '"') {
      const int at = line;
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        s.push_back(text[i]);
      }
      if (stack.empty() || !stack.back().object || !stack.back().expect_key) continue;
      stack.back().key = s;
      stack.back().expect_key = false;
      std::string path;
      bool in_list = false;
      for (const Frame& f : stack) {
        in_list = in_list || !f.object;
        absl::StrAppend(&path, path.empty() ? "" : ".", f.key);
      }
      if (!in_list) lines.emplace(path, at);
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', c == '{', ""});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().object) {
      stack.back().expect_key = true;
    }
  }
  return lines;
}

std::string Quote(const nlohmann::json& value) {
  std::string s =
      value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

ConfigReader::ConfigReader(const nlohmann::json* object, std::string prefix, ConfigIssues* issues)
    : object_(object), prefix_(std::move(prefix)), issues_(issues) {}

std::string ConfigReader::Path(absl::string_view key) const {
  return prefix_.empty() ? std::string(key) : absl::StrCat(prefix_, ".", key);
}

namespace {

// "parity.workers" or, for a value given on the command line, "--workers (parity.workers)".
std::string Where(const ConfigIssues& issues, const std::string& path) {
  // An item of a list ("rank_list[2]") belongs to its list's flag.
  auto it = issues.flags.find(path.substr(0, path.find('[')));
  return it == issues.flags.end() ? path : absl::StrCat(it->second, " (", path, ")");
}

// " (line 7)": where the key (or the list holding the item) is in the file; "" when unknown
// or given on the command line.
std::string LineOf(const ConfigIssues& issues, const std::string& path) {
  const std::string key = path.substr(0, path.find('['));
  if (issues.flags.count(key) != 0) return "";
  auto line = issues.lines.find(key);
  return line == issues.lines.end() ? "" : absl::StrCat(" (line ", line->second, ")");
}

}  // namespace

void ConfigReader::Error(absl::string_view key, absl::string_view message) {
  const std::string path = Path(key);
  issues_->errors.push_back(
      absl::StrCat(Where(*issues_, path), ": ", message, LineOf(*issues_, path)));
}

void ConfigReader::Warning(absl::string_view key, absl::string_view message) {
  const std::string path = Path(key);
  issues_->warnings.push_back(
      absl::StrCat(Where(*issues_, path), ": ", message, LineOf(*issues_, path)));
}

bool ConfigReader::Has(absl::string_view key) const {
  return object_ != nullptr && object_->contains(std::string(key));
}

const nlohmann::json* ConfigReader::Get(absl::string_view key) {
  known_.emplace(key);
  if (object_ == nullptr) return nullptr;
  auto it = object_->find(std::string(key));
  if (it == object_->end()) return nullptr;
  return &*it;
}

void ConfigReader::Int(absl::string_view key, int64_t* out, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) {
    Error(key, absl::StrCat("expected an integer, got ", Quote(*v)));
    return;
  }
  // Unsigned values above INT64_MAX are reported as out of range, not wrapped.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    Error(key, absl::StrCat("must be between ", min, " and ", max, ", got ", Quote(*v)));
    return;
  }
  const int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    Error(key, absl::StrCat("must be between ", min, " and ", max, ", got ", i));
    return;
  }
  *out = i;
}

void ConfigReader::Bytes(absl::string_view key, uint64_t* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return;
  }
  if (v->is_string()) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(v->get<std::string>());
    if (bytes.ok()) {
      *out = *bytes;
      return;
    }
  }
  Error(key, absl::StrCat("expected a byte size (an integer or a string like \"64MiB\"), got ",
                          Quote(*v)));
}

void ConfigReader::Double(absl::string_view key, double* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_number()) {
    Error(key, absl::StrCat("expected a number, got ", Quote(*v)));
    return;
  }
  *out = v->get<double>();
}

void ConfigReader::Bool(absl::string_view key, bool* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_boolean()) {
    Error(key, absl::StrCat("expected true or false, got ", Quote(*v)));
    return;
  }
  *out = v->get<bool>();
}

void ConfigReader::String(absl::string_view key, std::string* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_string()) {
    Error(key, absl::StrCat("expected a string, got ", Quote(*v)));
    return;
  }
  *out = v->get<std::string>();
}

void ConfigReader::StringList(absl::string_view key, std::vector<std::string>* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    Error(key, absl::StrCat("expected a list of strings, got ", Quote(*v)));
    return;
  }
  std::vector<std::string> result;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& item = (*v)[i];
    if (!item.is_string()) {
      Error(absl::StrCat(key, "[", i, "]"), absl::StrCat("expected a string, got ", Quote(item)));
      return;
    }
    result.push_back(item.get<std::string>());
  }
  *out = std::move(result);
}

void ConfigReader::IndexList(absl::string_view key, std::vector<int64_t>* out) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    Error(key, absl::StrCat("expected a list of integers, got ", Quote(*v)));
    return;
  }
  constexpr int64_t kMaxRange = 1 << 20;  // a range wider than this is a typo, not a request
  std::vector<int64_t> result;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& item = (*v)[i];
    const std::string item_key = absl::StrCat(key, "[", i, "]");
    if (item.is_number_integer() && item.get<int64_t>() >= 0) {
      result.push_back(item.get<int64_t>());
      continue;
    }
    if (item.is_string()) {
      std::vector<absl::string_view> parts = absl::StrSplit(item.get<std::string>(), '-');
      int64_t lo = 0, hi = 0;
      if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &lo) && absl::SimpleAtoi(parts[1], &hi) &&
          lo >= 0 && lo <= hi && hi - lo < kMaxRange) {
        for (int64_t x = lo; x <= hi; ++x) result.push_back(x);
        continue;
      }
    }
    Error(item_key,
          absl::StrCat("expected a non-negative integer or a range \"a-b\", got ", Quote(item)));
    return;
  }
  *out = std::move(result);
}

void ConfigReader::Choice(absl::string_view key, std::string* out,
                          std::initializer_list<const char*> choices) {
  Choice(key, out, std::vector<std::string>(choices.begin(), choices.end()));
}

void ConfigReader::Choice(absl::string_view key, std::string* out,
                          const std::vector<std::string>& choices) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (v->is_string()) {
    for (const std::string& c : choices) {
      if (v->get<std::string>() == c) {
        *out = c;
        return;
      }
    }
  }
  std::vector<std::string> quoted;
  for (const std::string& c : choices) quoted.push_back(absl::StrCat("\"", c, "\""));
  Error(key, absl::StrCat("expected one of ", absl::StrJoin(quoted, ", "), ", got ", Quote(*v)));
}

void ConfigReader::Ignored(absl::string_view key, absl::string_view why) {
  if (Get(key) != nullptr) Warning(key, absl::StrCat("ignored: ", why));
}

void ConfigReader::Accepted(absl::string_view key) { Get(key); }

ConfigReader ConfigReader::Section(absl::string_view key) {
  const nlohmann::json* v = Get(key);
  if (v != nullptr && !v->is_object()) {
    Error(key, absl::StrCat("expected an object, got ", TypeName(*v), " ", Quote(*v)));
    v = nullptr;
  }
  return ConfigReader(v, Path(key), issues_);
}

void ConfigReader::Finish() {
  if (object_ == nullptr) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (known_.count(it.key()) == 0) Warning(it.key(), "unknown key, ignored");
  }
}

}  // namespace parity::common
