// Typed, path-aware reading of a JSON object, collecting every error and warning: what the key
// tables' rows (common/config/config_table.h) and the standards file's reader use.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

namespace parity::common {

// Problems found while reading one document.
struct ConfigIssues {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  // Keys whose value came from a command-line flag, by path ("parity.workers" -> "--workers"):
  // their messages name the flag too.
  std::map<std::string, std::string> flags;
  // The line of each key in the file ("tensor.port" -> 7; KeyLines()): messages name it.
  std::map<std::string, int> lines;
};

// The 1-based line of every object key of a JSON text, by dotted path ("tensor.port"; keys
// inside lists are left out). A scan of the text alone: for a text nlohmann::json parsed.
std::map<std::string, int> KeyLines(absl::string_view text);

// Reads the members of one JSON object. Each getter marks its key as known, leaves the output
// untouched when the key is absent, and records an error naming "prefix.key" when the value has
// the wrong type or range. Finish() reports unknown keys as warnings. Not thread-safe.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json* object, std::string prefix, ConfigIssues* issues);

  bool Has(absl::string_view key) const;
  void Int(absl::string_view key, int64_t* out, int64_t min, int64_t max);
  void Bytes(absl::string_view key, uint64_t* out);  // integer or "64MiB"-style string
  void Double(absl::string_view key, double* out);
  void Bool(absl::string_view key, bool* out);
  void String(absl::string_view key, std::string* out);
  void StringList(absl::string_view key, std::vector<std::string>* out);
  // Non-negative integers; strings "a-b" expand to a..b inclusive (msprobe's step/rank ranges).
  void IndexList(absl::string_view key, std::vector<int64_t>* out);
  // A string restricted to `choices`.
  void Choice(absl::string_view key, std::string* out, std::initializer_list<const char*> choices);
  void Choice(absl::string_view key, std::string* out, const std::vector<std::string>& choices);
  // A key Parity accepts but does not use: a warning when present.
  void Ignored(absl::string_view key, absl::string_view why);
  // A key Parity accepts silently (msprobe compatibility) but does not use.
  void Accepted(absl::string_view key);
  // A nested object; absent → a reader over nothing. A non-object value is an error.
  ConfigReader Section(absl::string_view key);
  // Warnings for every key no getter asked for.
  void Finish();

  void Error(absl::string_view key, absl::string_view message);
  void Warning(absl::string_view key, absl::string_view message);
  std::string Path(absl::string_view key) const;

 private:
  const nlohmann::json* Get(absl::string_view key);

  const nlohmann::json* object_;
  std::string prefix_;
  ConfigIssues* issues_;
  std::set<std::string, std::less<>> known_;
};

// A JSON value for an error message, shortened: `"abc"`, `12.5`, `[1,2]`.
std::string Quote(const nlohmann::json& value);

}  // namespace parity::common
