// Configuration keys as one table per side (the agent's in common/config/config_keys.cc, the
// server's in server/config/server_keys.cc): an array of rows, each a key's dotted path, type,
// range, description and command-line flag, bound to the member of the config struct that holds
// it (on the server, the options struct of the component that reads it, nested in the config).
// The table drives reading a config.json, the effective-configuration lines (and their digest),
// the server's flags and --help, the key list the Python front-end routes keyword overrides
// with, and docs/configuration.md's key tables (config_docs.cc), which ctest config_docs
// compares. For the key tables and the parsers beside them; immutable once built.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config.h"
#include "common/config/config_reader.h"

namespace parity::common {

// What a key holds (for docs, flags and the Python key list).
enum class KeyKind {
  kBool,
  kInteger,
  kBytes,   // an integer or "64MiB"
  kNumber,  // a real number
  kString,
  kChoice,  // a string from a fixed set
  kStringList,
  kIndexList,  // non-negative integers and "a-b" ranges
  kIgnored,    // accepted with a warning, no effect
  kAccepted,   // accepted silently (another msprobe task's section or key)
};

// "bool", "integer", "size", ... as docs/configuration.md writes the type.
const char* KeyKindName(KeyKind kind);

template <typename Config>
struct ConfigKey {
  std::string path;  // "parity.workers", "tensor.host", "rank"
  KeyKind kind = KeyKind::kString;
  // What the key means: the one description, docs/configuration.md's "meaning" cell (markdown;
  // `parity-server --config_docs` writes the docs' tables from it, --help prints it as text).
  // For an ignored key, also the warning's why.
  std::string doc;
  std::string flag;                  // command-line flag name; empty: none
  std::vector<std::string> choices;  // kChoice
  // The docs' type and default cells where the ones made from the kind, choices and default
  // value (common/config/config_docs.cc) would say less: "integer 0-19", "`0` = all". Empty:
  // made.
  std::string docs_type, docs_default;
  // Setters for a row of the array: `Int(...).Flag("workers")`.
  ConfigKey& Flag(std::string name) {
    flag = std::move(name);
    return *this;
  }
  ConfigKey& DocsType(std::string cell) {
    docs_type = std::move(cell);
    return *this;
  }
  ConfigKey& DocsDefault(std::string cell) {
    docs_default = std::move(cell);
    return *this;
  }
  // Reads the key from its section's reader (`name` is the last path component).
  std::function<void(ConfigReader&, const std::string& name, Config&)> read;
  // The effective value as text; empty function: not part of the description.
  std::function<std::string(const Config&)> show;

  std::string Name() const { return path.substr(path.rfind('.') + 1); }
  std::string Section() const {
    const std::size_t dot = path.rfind('.');
    return dot == std::string::npos ? "" : path.substr(0, dot);
  }
};

// The row makers of a key table: `using K = KeyRows<ServerConfig>;` then `K::Int(path, get, min,
// max, doc)`, where `get` is an accessor `[](Config& c) { return &c.service.max_streams; }`
// naming the member that holds the key. Each returns the row by value, so that a table is an
// array of them.
template <typename Config>
struct KeyRows {
  using Key = ConfigKey<Config>;

  template <typename Get>
  static Key Bool(std::string path, Get get, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kBool, std::move(doc));
    k.read = [get](ConfigReader& r, const std::string& n, Config& c) { r.Bool(n, get(c)); };
    k.show = [get](const Config& c) {
      return std::string(*get(const_cast<Config&>(c)) ? "true" : "false");
    };
    return k;
  }
  template <typename Get>
  static Key Int(std::string path, Get get, int64_t min, int64_t max, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kInteger, std::move(doc));
    k.read = [get, min, max](ConfigReader& r, const std::string& n, Config& c) {
      auto* out = get(c);
      int64_t v = static_cast<int64_t>(*out);
      r.Int(n, &v, min, max);
      *out = static_cast<std::remove_reference_t<decltype(*out)>>(v);
    };
    k.show = [get](const Config& c) { return absl::StrCat(*get(const_cast<Config&>(c))); };
    return k;
  }
  template <typename Get>
  static Key Double(std::string path, Get get, double min, double max, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kNumber, std::move(doc));
    k.read = [get, min, max](ConfigReader& r, const std::string& n, Config& c) {
      double v = *get(c);
      r.Double(n, &v);
      if (!(v >= min && v <= max)) {
        r.Error(n, absl::StrCat("expected a number in [", min, ", ", max, "], got ", v));
        return;
      }
      *get(c) = v;
    };
    k.show = [get](const Config& c) { return absl::StrCat(*get(const_cast<Config&>(c))); };
    return k;
  }
  template <typename Get>
  static Key Bytes(std::string path, Get get, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kBytes, std::move(doc));
    k.read = [get](ConfigReader& r, const std::string& n, Config& c) { r.Bytes(n, get(c)); };
    k.show = [get](const Config& c) { return absl::StrCat(*get(const_cast<Config&>(c))); };
    return k;
  }
  template <typename Get>
  static Key String(std::string path, Get get, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kString, std::move(doc));
    k.read = [get](ConfigReader& r, const std::string& n, Config& c) { r.String(n, get(c)); };
    k.show = [get](const Config& c) { return *get(const_cast<Config&>(c)); };
    return k;
  }
  // A choice kept as text in the struct.
  template <typename Get>
  static Key Choice(std::string path, Get get, std::vector<std::string> choices, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kChoice, std::move(doc));
    k.choices = choices;
    k.read = [get, choices](ConfigReader& r, const std::string& n, Config& c) {
      r.Choice(n, get(c), choices);
    };
    k.show = [get](const Config& c) { return *get(const_cast<Config&>(c)); };
    return k;
  }
  // A choice kept as an enum: `names` lists (text, value) pairs.
  template <typename Get, typename Enum>
  static Key EnumChoice(std::string path, Get get, std::vector<std::pair<std::string, Enum>> names,
                        std::string doc) {
    Key k = Make(std::move(path), KeyKind::kChoice, std::move(doc));
    for (const auto& [text, value] : names) k.choices.push_back(text);
    k.read = [get, names, choices = k.choices](ConfigReader& r, const std::string& n, Config& c) {
      std::string text;
      for (const auto& [t, v] : names) {
        if (v == *get(c)) text = t;
      }
      r.Choice(n, &text, choices);
      for (const auto& [t, v] : names) {
        if (t == text) *get(c) = v;
      }
    };
    k.show = [get, names](const Config& c) {
      for (const auto& [t, v] : names) {
        if (v == *get(const_cast<Config&>(c))) return t;
      }
      return std::string("?");
    };
    return k;
  }
  template <typename Get>
  static Key StringList(std::string path, Get get, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kStringList, std::move(doc));
    k.read = [get](ConfigReader& r, const std::string& n, Config& c) { r.StringList(n, get(c)); };
    k.show = [get](const Config& c) {
      return absl::StrCat("[", absl::StrJoin(*get(const_cast<Config&>(c)), ", "), "]");
    };
    return k;
  }
  template <typename Get>
  static Key IndexList(std::string path, Get get, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kIndexList, std::move(doc));
    k.read = [get](ConfigReader& r, const std::string& n, Config& c) { r.IndexList(n, get(c)); };
    k.show = [get](const Config& c) {
      const auto& v = *get(const_cast<Config&>(c));
      return v.empty() ? std::string("[] (all)") : absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    };
    return k;
  }
  // A key of msprobe's that Parity accepts with a warning saying why it has no effect.
  static Key Ignored(std::string path, std::string why) {
    Key k = Make(std::move(path), KeyKind::kIgnored, why);
    k.read = [why](ConfigReader& r, const std::string& n, Config&) { r.Ignored(n, why); };
    return k;
  }
  // Keys ignored for one reason: several rows.
  static std::vector<Key> Ignored(std::initializer_list<const char*> paths,
                                  const std::string& why) {
    std::vector<Key> out;
    for (const char* p : paths) out.push_back(Ignored(p, why));
    return out;
  }
  // A key (or section) of another msprobe task that may share the file: accepted silently.
  static Key Accepted(std::string path, std::string doc) {
    Key k = Make(std::move(path), KeyKind::kAccepted, std::move(doc));
    k.read = [](ConfigReader& r, const std::string& n, Config&) { r.Accepted(n); };
    return k;
  }
  template <typename Paths>
  static std::vector<Key> AcceptedEach(const Paths& paths, const std::string& doc) {
    std::vector<Key> out;
    for (const char* p : paths) out.push_back(Accepted(p, doc));
    return out;
  }
  static std::vector<Key> Accepted(std::initializer_list<const char*> paths,
                                   const std::string& doc) {
    return AcceptedEach(paths, doc);
  }
  // A key read by `read` (for keys with rules of their own); `show` may be empty.
  static Key Custom(std::string path, KeyKind kind,
                    std::function<void(ConfigReader&, const std::string&, Config&)> read,
                    std::function<std::string(const Config&)> show, std::string doc) {
    Key k = Make(std::move(path), kind, std::move(doc));
    k.read = std::move(read);
    k.show = std::move(show);
    return k;
  }

 private:
  static Key Make(std::string path, KeyKind kind, std::string doc) {
    Key k;
    k.path = std::move(path);
    k.kind = kind;
    k.doc = std::move(doc);
    return k;
  }
};

template <typename Config>
class KeyTable {
 public:
  using Key = ConfigKey<Config>;

  // One entry of the array a table is made from: a row, or several made together
  // (KeyRows::Accepted of a list).
  struct Rows {
    Rows(Key key) { keys.push_back(std::move(key)); }             // NOLINT: an array's rows convert
    Rows(std::vector<Key> several) : keys(std::move(several)) {}  // NOLINT
    std::vector<Key> keys;
  };
  explicit KeyTable(std::initializer_list<Rows> rows) {
    for (const Rows& r : rows) keys_.insert(keys_.end(), r.keys.begin(), r.keys.end());
  }

  const std::vector<Key>& keys() const { return keys_; }
  const Key* Find(const std::string& path) const {
    for (const Key& k : keys_) {
      if (k.path == path) return &k;
    }
    return nullptr;
  }
  // The key a command-line flag sets: `--name`, or `--noname` for a bool key; null for none.
  const Key* FindFlag(const std::string& name) const {
    for (const Key& k : keys_) {
      if (!k.flag.empty() &&
          (k.flag == name || (k.kind == KeyKind::kBool && name == absl::StrCat("no", k.flag)))) {
        return &k;
      }
    }
    return nullptr;
  }

  // Reads every key from `doc` into `config`, in table order; problems go to `issues`, keys no
  // row names are warnings. Sections are the keys' path prefixes; a non-object where a section
  // belongs is an error.
  void Read(const nlohmann::json& doc, Config& config, ConfigIssues& issues) const {
    std::map<std::string, ConfigReader> readers;
    readers.emplace("", ConfigReader(&doc, "", &issues));
    for (const Key& k : keys_) {
      k.read(ReaderFor(readers, k.Section()), k.Name(), config);
    }
    // Deepest sections first, so unknown keys are reported in a stable order.
    for (auto it = readers.rbegin(); it != readers.rend(); ++it) it->second.Finish();
  }

  // "path = value" lines for every shown key.
  std::string Describe(const Config& config) const {
    std::vector<std::string> lines;
    for (const Key& k : keys_) {
      if (k.show) lines.push_back(absl::StrCat(k.path, " = ", k.show(config)));
    }
    return absl::StrJoin(lines, "\n");
  }

  // Every key as KeyDescription (docs, --help, the Python front-end), its default the value of
  // a default-constructed Config.
  std::vector<KeyDescription> Descriptions() const {
    const Config defaults;
    std::vector<KeyDescription> out;
    for (const Key& k : keys_) {
      KeyDescription d;
      d.path = k.path;
      d.kind = KeyKindName(k.kind);
      d.default_value = k.show ? k.show(defaults) : "";
      d.shown = static_cast<bool>(k.show);
      d.doc = k.doc;
      d.flag = k.flag.empty() ? "" : absl::StrCat("--", k.flag);
      d.choices = k.choices;
      d.docs_type = k.docs_type;
      d.docs_default = k.docs_default;
      out.push_back(std::move(d));
    }
    return out;
  }

 private:
  static ConfigReader& ReaderFor(std::map<std::string, ConfigReader>& readers,
                                 const std::string& section) {
    auto it = readers.find(section);
    if (it != readers.end()) return it->second;
    const std::size_t dot = section.rfind('.');
    const std::string parent = dot == std::string::npos ? "" : section.substr(0, dot);
    const std::string name = dot == std::string::npos ? section : section.substr(dot + 1);
    ConfigReader child = ReaderFor(readers, parent).Section(name);
    return readers.emplace(section, std::move(child)).first->second;
  }

  std::vector<Key> keys_;
};

// What the parsers of both sides share (common/config/config.cc).
// A config.json text as a JSON object; a syntax error becomes an INVALID_ARGUMENT naming line
// and column.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source);
// OK, or an INVALID_ARGUMENT listing every error, one per line.
absl::Status Summarise(const ConfigIssues& issues, absl::string_view source);
// A command-line flag's text as the JSON value a key of `kind` expects; errors name
// `--flag_name (path)`.
absl::StatusOr<nlohmann::json> FlagJson(KeyKind kind, const std::string& flag_name,
                                        const std::string& path,
                                        const std::optional<std::string>& value);
// Sets `doc`'s value at the dotted `path`, creating sections (a non-object in the way is
// replaced: the flag wins over the file).
void SetAt(nlohmann::json& doc, const std::string& path, nlohmann::json value);
// Every name of a list that selects calls must parse (common/naming/selection.h); `substrings`:
// msprobe's `list`, whose entries may also be plain substrings.
void CheckNames(absl::string_view key, const std::vector<std::string>& names, bool substrings,
                std::vector<std::string>& errors);

// Sets `flags` over `doc` (each names a key of `table`): an unknown flag or a value of the wrong
// form is an error in `issues`, which also learns which key each flag set.
template <typename Config>
void ApplyFlags(const KeyTable<Config>& table, const std::vector<FlagValue>& flags,
                absl::string_view help, nlohmann::json& doc, ConfigIssues& issues) {
  for (const FlagValue& f : flags) {
    const ConfigKey<Config>* key = table.FindFlag(f.name);
    if (key == nullptr) {
      issues.errors.push_back(absl::StrCat("--", f.name, ": unknown flag (", help, " lists them)"));
      continue;
    }
    absl::StatusOr<nlohmann::json> value = key->flag != f.name
                                               ? absl::StatusOr<nlohmann::json>(false)
                                               : FlagJson(key->kind, key->flag, key->path, f.value);
    if (!value.ok()) {
      issues.errors.push_back(std::string(value.status().message()));
      continue;
    }
    SetAt(doc, key->path, *std::move(value));
    issues.flags[key->path] = absl::StrCat("--", key->flag);
  }
}

}  // namespace parity::common
