#include "common/naming/operator_catalogue.h"

#include <atomic>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/config/config.h"
#include "common/naming/naming.h"
#include "nlohmann/json.hpp"

extern const char kParityOperatorsJson[];  // common/naming/operators.json, embedded

namespace parity::common {
namespace {

struct FamilyText {
  RandomFamily family;
  const char* name;
};
constexpr FamilyText kFamilies[] = {
    {RandomFamily::kDropout, "dropout"},
    {RandomFamily::kFeatureDropout, "feature_dropout"},
    {RandomFamily::kAlphaDropout, "alpha_dropout"},
    {RandomFamily::kFeatureAlphaDropout, "feature_alpha_dropout"},
    {RandomFamily::kNativeDropout, "native_dropout"},
    {RandomFamily::kBernoulli, "bernoulli"},
    {RandomFamily::kUniform, "uniform"},
    {RandomFamily::kNormal, "normal"},
    {RandomFamily::kLogNormal, "log_normal"},
    {RandomFamily::kExponential, "exponential"},
    {RandomFamily::kCauchy, "cauchy"},
    {RandomFamily::kGeometric, "geometric"},
    {RandomFamily::kRandint, "randint"},
    {RandomFamily::kRandperm, "randperm"},
    {RandomFamily::kMultinomial, "multinomial"},
    {RandomFamily::kPoisson, "poisson"},
    {RandomFamily::kRrelu, "rrelu"},
    {RandomFamily::kUnchecked, "unchecked"},
};
static_assert(std::size(kFamilies) == static_cast<std::size_t>(RandomFamily::kUnchecked),
              "every family but kNone has a name");

// `j[key]` as a list of strings, into `out`; an error naming `where` otherwise.
absl::Status Names(const nlohmann::json& j, const std::string& where,
                   std::vector<std::string>* out) {
  if (!j.is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a list"));
  for (const nlohmann::json& e : j) {
    if (!e.is_string() || e.get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected operator names"));
    }
    out->push_back(e.get<std::string>());
  }
  return absl::OkStatus();
}

// The sections of a parsed file, read in the catalogue's own words.
struct Sections {
  std::vector<std::pair<std::string, std::string>> never_replayed;  // op, what it returns
  std::vector<std::pair<std::string, RandomFamily>> random;
  std::vector<std::string> namespaces, ops;
};

absl::Status ReadSections(const nlohmann::json& doc, Sections* s) {
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "_comment") continue;
    if (key == "version") {
      if (v != 1) return absl::InvalidArgumentError("version: only 1 is known");
    } else if (key == "never_replayed" || key == "random") {
      if (!v.is_object()) return absl::InvalidArgumentError(absl::StrCat(key, ": expected {}"));
      for (auto e = v.begin(); e != v.end(); ++e) {
        std::vector<std::string> names;
        const std::string where = absl::StrCat(key, ".", e.key());
        if (absl::Status st = Names(e.value(), where, &names); !st.ok()) return st;
        std::optional<RandomFamily> family;
        for (const FamilyText& f : kFamilies) {
          if (e.key() == f.name) family = f.family;
        }
        if (key == "random" && !family) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": no such family"));
        }
        for (std::string& n : names) {
          if (key == "random") {
            s->random.emplace_back(std::move(n), *family);
          } else {
            s->never_replayed.emplace_back(std::move(n), e.key());
          }
        }
      }
    } else if (key == "communication") {
      for (auto e = v.begin(); v.is_object() && e != v.end(); ++e) {
        std::vector<std::string>* out = e.key() == "namespaces"  ? &s->namespaces
                                        : e.key() == "operators" ? &s->ops
                                                                 : nullptr;
        if (out == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("communication.", e.key(), ": only namespaces and operators"));
        }
        if (absl::Status st = Names(e.value(), "communication." + e.key(), out); !st.ok()) {
          return st;
        }
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(key, ": not a catalogue section (never_replayed, communication, random)"));
    }
  }
  return absl::OkStatus();
}

std::atomic<const OperatorCatalogue*>& Current() {
  static std::atomic<const OperatorCatalogue*> current{
      new OperatorCatalogue(OperatorCatalogue::BuiltIn())};
  return current;
}

}  // namespace

absl::StatusOr<OperatorCatalogue> OperatorCatalogue::Parse(absl::string_view json_text,
                                                           absl::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr,
                                                   /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  Sections s;
  if (absl::Status st = ReadSections(doc, &s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", st.message()));
  }
  OperatorCatalogue c;
  std::vector<std::string> twice;
  for (auto& [op, what] : s.never_replayed) {
    Entry& e = c.by_bare_name_[op];
    if (!e.never_replayed.empty()) twice.push_back(op);
    e.never_replayed = std::move(what);
  }
  for (auto& [op, family] : s.random) {
    Entry& e = c.by_bare_name_[op];
    if (!e.never_replayed.empty() || e.random_family != RandomFamily::kNone) twice.push_back(op);
    e.random_family = family;
  }
  c.communication_namespaces_.insert(s.namespaces.begin(), s.namespaces.end());
  c.communication_ops_.insert(s.ops.begin(), s.ops.end());
  if (!twice.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": listed twice: ", absl::StrJoin(twice, ", ")));
  }
  return c;
}

OperatorCatalogue OperatorCatalogue::BuiltIn() {
  absl::StatusOr<OperatorCatalogue> c = Parse(kParityOperatorsJson, "operators.json");
  // The built-in file is tested (OperatorCatalogueTest); an empty catalogue is never used.
  return c.ok() ? *std::move(c) : OperatorCatalogue();
}

absl::Status OperatorCatalogue::Add(const OperatorCatalogue& other, absl::string_view source) {
  std::vector<std::string> conflicts;
  for (const auto& [op, entry] : other.by_bare_name_) {
    auto it = by_bare_name_.find(op);
    if (it != by_bare_name_.end() && (it->second.never_replayed != entry.never_replayed ||
                                      it->second.random_family != entry.random_family)) {
      conflicts.push_back(op);
    }
  }
  if (!conflicts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        ": classifies differently from the built-in catalogue: ", absl::StrJoin(conflicts, ", ")));
  }
  by_bare_name_.insert(other.by_bare_name_.begin(), other.by_bare_name_.end());
  communication_namespaces_.insert(other.communication_namespaces_.begin(),
                                   other.communication_namespaces_.end());
  communication_ops_.insert(other.communication_ops_.begin(), other.communication_ops_.end());
  return absl::OkStatus();
}

OperatorClass OperatorCatalogue::Classify(absl::string_view op_name) const {
  OperatorClass c;
  c.communication = IsCommunication(op_name);
  if (auto it = by_bare_name_.find(BareOpName(op_name)); it != by_bare_name_.end()) {
    if (!it->second.never_replayed.empty()) c.never_replayed = &it->second.never_replayed;
    c.random_family = it->second.random_family;
  }
  return c;
}

std::string OperatorCatalogue::SkipReason(absl::string_view op_name) const {
  auto it = by_bare_name_.find(BareOpName(op_name));
  if (it == by_bare_name_.end() || it->second.never_replayed.empty()) return "";
  return NeverReplayedReason(op_name, it->second.never_replayed);
}

std::string NeverReplayedReason(absl::string_view op_name, absl::string_view what) {
  return absl::StrCat(op_name, " returns ", what, "; nothing to compare");
}

bool OperatorCatalogue::IsCommunication(absl::string_view op_name) const {
  const std::size_t colon = op_name.find("::");
  if (colon != absl::string_view::npos &&
      communication_namespaces_.count(op_name.substr(0, colon)) > 0) {
    return true;
  }
  return communication_ops_.count(op_name) > 0;
}

RandomFamily OperatorCatalogue::RandomFamilyOf(absl::string_view op_name) const {
  auto it = by_bare_name_.find(BareOpName(op_name));
  return it == by_bare_name_.end() ? RandomFamily::kNone : it->second.random_family;
}

std::vector<std::string> OperatorCatalogue::RandomOpNames() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : by_bare_name_) {
    if (entry.random_family != RandomFamily::kNone) names.push_back(name);
  }
  return names;
}

const OperatorCatalogue& ProcessOperatorCatalogue() {
  return *Current().load(std::memory_order_acquire);
}

absl::Status AddToOperatorCatalogue(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<OperatorCatalogue> added = OperatorCatalogue::Parse(*text, path);
  if (!added.ok()) return added.status();
  static absl::Mutex mu;
  absl::MutexLock lock(&mu);
  auto merged = std::make_unique<OperatorCatalogue>(ProcessOperatorCatalogue());
  if (absl::Status s = merged->Add(*added, path); !s.ok()) return s;
  // The catalogue it replaces stays allocated: a call on another thread may be reading it.
  Current().store(merged.release(), std::memory_order_release);
  return absl::OkStatus();
}

OperatorClass ClassifyOp(absl::string_view op_name) {
  return ProcessOperatorCatalogue().Classify(op_name);
}
RandomFamily RandomFamilyOf(absl::string_view op_name) {
  return ProcessOperatorCatalogue().RandomFamilyOf(op_name);
}
std::vector<std::string> RandomOpNames() { return ProcessOperatorCatalogue().RandomOpNames(); }

absl::string_view RandomFamilyName(RandomFamily family) {
  for (const FamilyText& f : kFamilies) {
    if (f.family == family) return f.name;
  }
  return "";
}

}  // namespace parity::common
