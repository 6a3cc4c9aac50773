#include "server/compare/standards.h"

#include <iterator>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config.h"
#include "common/config/config_reader.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/wire/dtype.h"

extern const char kParityDefaultStandardsJson[];  // generated from server/data/standards.json

namespace parity::server {

namespace {

struct StandardText {
  Standard standard;
  absl::string_view name;     // the wire's, the JSON-lines' and standards.json's
  absl::string_view display;  // msprobe's 比对算法 column
  bool listable;              // may list ops in standards.json
};

// Indexed by the enum: the static_assert below keeps the two in step.
constexpr StandardText kStandardTexts[] = {
    {Standard::kBenchmark, "benchmark", "标杆比对法", true},
    {Standard::kAbsoluteThreshold, "absolute_threshold", "绝对阈值法", true},
    {Standard::kBinary, "binary", "二进制一致法", true},
    {Standard::kUlp, "ulp", "ULP误差比对法", true},
    {Standard::kThousandth, "thousandth", "双千指标法", true},
    {Standard::kTwoWay, "two_way", "两方比对法", true},
    {Standard::kStatistics, "statistics", "统计量比对法", false},
    {Standard::kExact, "exact", "二进制一致法", false},
    {Standard::kRandomProperty, "random_property", "随机性质检验法", true},
    {Standard::kNone, "", "", false},
};

constexpr bool TextsFollowTheEnum() {
  for (size_t i = 0; i < std::size(kStandardTexts); ++i) {
    if (static_cast<size_t>(kStandardTexts[i].standard) != i) return false;
  }
  return std::size(kStandardTexts) == static_cast<size_t>(Standard::kNone) + 1;
}
static_assert(TextsFollowTheEnum(), "kStandardTexts must list every Standard in enum order");

const StandardText& TextOf(Standard s) { return kStandardTexts[static_cast<size_t>(s)]; }

}  // namespace

absl::string_view StandardName(Standard s) { return TextOf(s).name; }

absl::string_view StandardDisplayName(Standard s) { return TextOf(s).display; }

Standard StandardsTable::Lookup(absl::string_view op_name, int input_rank) const {
  const absl::string_view bare = common::BareOpName(op_name);
  auto it = by_name_.find(bare);
  if (it == by_name_.end() && !bare.empty() && bare.back() == '_') {
    it = by_name_.find(bare.substr(0, bare.size() - 1));  // in-place form of a listed op
  }
  if (it != by_name_.end()) return it->second;
  if ((bare == "convolution" || bare == "_convolution") && convolution_ranks_.count(input_rank)) {
    return Standard::kThousandth;
  }
  return default_standard_;
}

bool StandardsTable::ExactByConstruction(absl::string_view op_name) const {
  const absl::string_view bare = common::BareOpName(op_name);
  if (exact_.count(bare)) return true;
  return !bare.empty() && bare.back() == '_' && exact_.count(bare.substr(0, bare.size() - 1));
}

const std::string* StandardsTable::UncomparedReason(absl::string_view op_name, int index) const {
  auto it = uncompared_.find(common::BareOpName(op_name));
  if (it == uncompared_.end() || it->second.outputs.count(index) == 0) return nullptr;
  return &it->second.reason;
}

const DTypeConstants* StandardsTable::Constants(wire::DType dtype) const {
  auto it = constants_.find(dtype);
  return it == constants_.end() ? nullptr : &it->second;
}

void StandardsTable::ReadStandards(common::ConfigReader& top) {
  common::ConfigReader stds = top.Section("standards");
  for (const StandardText& text : kStandardTexts) {
    if (!text.listable) continue;
    const Standard standard = text.standard;
    const std::string name(text.name);
    std::vector<std::string> ops;
    stds.StringList(name, &ops);
    for (const std::string& op : ops) {
      // Random ops take their own path (replayed from the generator state, or judged by their
      // draws' properties); the table names that standard, and only for them.
      const bool random = common::RandomFamilyOf(op) != common::RandomFamily::kNone;
      if (random != (standard == Standard::kRandomProperty)) {
        stds.Error(name, random ? absl::StrCat("\"", op,
                                               "\" draws random numbers: list it under "
                                               "random_property")
                                : absl::StrCat("\"", op, "\" draws no random numbers"));
        continue;
      }
      auto [it, inserted] = by_name_.emplace(op, standard);
      if (!inserted && it->second != standard) {
        stds.Error(name,
                   absl::StrCat("\"", op, "\" is also listed under ", StandardName(it->second)));
      }
    }
  }
  stds.Finish();
}

void StandardsTable::ReadUncompared(const nlohmann::json& doc, common::ConfigReader& top) {
  // {"op": {"outputs": [4, 5, 6], "reason": "..."}}: outputs reported SKIP with the reason.
  if (doc.contains("uncompared_outputs")) {
    top.Accepted("uncompared_outputs");
    const nlohmann::json& u = doc["uncompared_outputs"];
    bool ok = u.is_object();
    for (auto it = u.begin(); ok && it != u.end(); ++it) {
      const nlohmann::json& e = it.value();
      ok = e.is_object() && e.contains("outputs") && e["outputs"].is_array() &&
           e.contains("reason") && e["reason"].is_string() &&
           !e["reason"].get<std::string>().empty();
      Uncompared entry;
      for (const nlohmann::json& i : ok ? e["outputs"] : nlohmann::json::array()) {
        ok = ok && i.is_number_integer() && i.get<int64_t>() >= 0;
        if (ok) entry.outputs.insert(i.get<int>());
      }
      if (ok) {
        entry.reason = e["reason"].get<std::string>();
        uncompared_.emplace(it.key(), std::move(entry));
      }
    }
    if (!ok) {
      top.Error("uncompared_outputs",
                "expected {\"op\": {\"outputs\": [indices >= 0], \"reason\": \"text\"}}");
    }
  }
}

void StandardsTable::ReadExact(common::ConfigReader& top) {
  // Ops whose results are exact by construction: judged by the binary standard, so they may not
  // be listed under a standard that tolerates error.
  std::vector<std::string> exact;
  top.StringList("exact_by_construction", &exact);
  for (const std::string& op : exact) {
    if (common::RandomFamilyOf(op) != common::RandomFamily::kNone) {
      top.Error("exact_by_construction", absl::StrCat("\"", op, "\" draws random numbers"));
      continue;
    }
    auto listed = by_name_.find(op);
    if (listed != by_name_.end() && listed->second != Standard::kBinary) {
      top.Error("exact_by_construction",
                absl::StrCat("\"", op, "\" is listed under ", StandardName(listed->second),
                             "; an exact op is judged by the binary standard"));
      continue;
    }
    exact_.insert(op);
  }
}

void StandardsTable::ReadDTypes(common::ConfigReader& top) {
  common::ConfigReader dtypes = top.Section("dtypes");
  for (const char* name : {"float16", "bfloat16", "float32", "float64"}) {
    if (!dtypes.Has(name)) {
      dtypes.Error(name, "missing: every floating dtype needs its constants");
      continue;
    }
    common::ConfigReader d = dtypes.Section(name);
    DTypeConstants c;
    d.Double("small_value", &c.small_value);
    d.Double("small_value_atol_absolute", &c.small_value_atol_absolute);
    d.Double("small_value_atol_benchmark", &c.small_value_atol_benchmark);
    d.Double("rtol", &c.rtol);
    d.Double("minimum_err", &c.minimum_err);
    int64_t min_exp = 0, bits = 0;
    d.Int("ulp_min_exponent", &min_exp, -1100, 0);
    d.Int("ulp_mantissa_bits", &bits, 1, 64);
    c.ulp_min_exponent = static_cast<int>(min_exp);
    c.ulp_mantissa_bits = static_cast<int>(bits);
    d.Double("ulp_threshold", &c.ulp_threshold);
    d.Finish();
    constants_[*common::ParseDType(name)] = c;
  }
  dtypes.Finish();
}

void StandardsTable::ReadThresholds(common::ConfigReader& top) {
  common::ConfigReader b = top.Section("benchmark_ratio_thresholds");
  b.Double("small_value_error_ratio", &benchmark_.small_value_error_ratio);
  b.Double("rmse", &benchmark_.rmse);
  b.Double("max_rel_error", &benchmark_.max_rel_error);
  b.Double("max_abs_error", &benchmark_.max_abs_error);
  b.Double("mean_rel_error", &benchmark_.mean_rel_error);
  b.Double("error_balance", &benchmark_.error_balance);
  b.Finish();
  common::ConfigReader u = top.Section("ulp_rules");
  u.Double("float32_mean_ulp", &ulp_.float32_mean_ulp);
  u.Double("float32_share", &ulp_.float32_share);
  u.Double("low_precision_share", &ulp_.low_precision_share);
  u.Double("share_ratio", &ulp_.share_ratio);
  u.Double("share_excess_alpha", &ulp_.share_excess_alpha);
  u.Finish();
  top.Double("thousandth_pass", &thousandth_pass_);
  common::ConfigReader w = top.Section("two_way");
  w.Double("cosine", &two_way_.cosine);
  w.Double("max_abs_error", &two_way_.max_abs_error);
  w.Double("hundredth", &two_way_.hundredth);
  w.Double("thousandth", &two_way_.thousandth);
  w.Double("ten_thousandth", &two_way_.ten_thousandth);
  w.Finish();
}

absl::StatusOr<StandardsTable> StandardsTable::Parse(absl::string_view json_text,
                                                     absl::string_view source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", e.what()));
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  }
  StandardsTable t;
  common::ConfigIssues issues;
  common::ConfigReader top(&doc, "", &issues);
  top.Accepted("_comment");
  int64_t version = 1;
  top.Int("version", &version, 1, 1);
  std::string def = "benchmark";
  top.Choice("default_standard", &def, {"benchmark", "two_way"});
  t.default_standard_ = def == "two_way" ? Standard::kTwoWay : Standard::kBenchmark;
  t.ReadStandards(top);
  t.ReadUncompared(doc, top);
  t.ReadExact(top);
  std::vector<int64_t> ranks;
  top.IndexList("convolution_thousandth_input_ranks", &ranks);
  t.convolution_ranks_.insert(ranks.begin(), ranks.end());
  t.ReadDTypes(top);
  t.ReadThresholds(top);
  top.Finish();
  if (!issues.errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", absl::StrJoin(issues.errors, "\n  ")));
  }
  return t;
}

absl::StatusOr<StandardsTable> StandardsTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = common::ReadFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

const StandardsTable& StandardsTable::Default() {
  static const StandardsTable* table = [] {
    absl::StatusOr<StandardsTable> t = Parse(kParityDefaultStandardsJson, "standards.json");
    // The shipped file is checked by a unit test; failing here is a build defect.
    if (!t.ok()) std::abort();
    return new StandardsTable(*std::move(t));
  }();
  return *table;
}

}  // namespace parity::server
