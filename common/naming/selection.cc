#include "common/naming/selection.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/naming/api_names.h"
#include "common/naming/msprobe_tables.h"
#include "common/naming/naming.h"

namespace parity::common {
namespace {

using internal::DistributedOps;
using internal::FunctionalOps;
using internal::OpList;
using internal::TensorOps;

// msprobe's API prefixes.
constexpr absl::string_view kPrefixes[] = {"Functional", "Torch", "Tensor",     "Aten",
                                           "NPU",        "VF",    "Distributed"};

bool IsIdentifier(absl::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsNumber(absl::string_view s, uint64_t* value = nullptr) {
  uint64_t v;
  if (s.empty() || !absl::SimpleAtoi(s, &v)) return false;
  if (value) *value = v;
  return true;
}

bool IsPhase(absl::string_view s) { return s == "forward" || s == "backward"; }

std::size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

// ---- OpNameIndex --------------------------------------------------------------------------------

OpNameIndex::OpNameIndex(const std::vector<std::string>& op_names) {
  std::unordered_set<std::string> suggestions;
  for (const std::string& op : op_names) {
    full_.insert(op);
    const std::string bare(BareOpName(op));
    bare_.insert(bare);
    suggestions.insert(bare);
  }
  // msprobe's functional names whose operator this process has.
  for (const auto& [api, ops] : FunctionalOps()) {
    if (bare_.count(ops.front()) > 0) suggestions.insert(api);
  }
  suggestions_.assign(suggestions.begin(), suggestions.end());
  std::sort(suggestions_.begin(), suggestions_.end());
}

bool OpNameIndex::Has(absl::string_view ns, absl::string_view name) const {
  if (ns.empty()) return bare_.count(std::string(name)) > 0;
  return full_.count(absl::StrCat(ns, "::", name)) > 0;
}

bool OpNameIndex::AnyContains(absl::string_view text) const {
  for (const std::string& op : full_) {
    if (absl::StrContains(op, text)) return true;
  }
  return false;
}

std::vector<std::string> OpNameIndex::Closest(absl::string_view name, std::size_t n) const {
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::vector<std::pair<std::size_t, const std::string*>> near;
  for (const std::string& s : suggestions_) {
    // A cheap bound first: names of very different lengths are far apart.
    const std::size_t gap =
        s.size() > name.size() ? s.size() - name.size() : name.size() - s.size();
    if (gap > limit) continue;
    const std::size_t d = EditDistance(name, s);
    if (d <= limit && d > 0) near.emplace_back(d, &s);
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < near.size() && out.size() < n; ++i) out.push_back(*near[i].second);
  return out;
}

// ---- NamePattern --------------------------------------------------------------------------------

void NamePattern::AddOperators(const std::string& ns, absl::string_view prefix,
                               const std::string& name, const std::optional<std::string>& overload,
                               bool bare) {
  auto add = [&](const std::string& op_ns, const std::string& op_name) {
    ops_.push_back({op_ns, op_name, overload.value_or(""), overload.has_value()});
  };
  auto add_all = [&](const std::string& op_ns, const OpList& ops) {
    for (const std::string& op : ops) add(op_ns, op);
  };
  if (!ns.empty()) {
    add(ns, name);
  } else if (prefix == "NPU") {
    add("npu", name);
  } else if (prefix == "Distributed") {
    auto it = DistributedOps().find(name);
    add("c10d", it == DistributedOps().end() ? name : it->second);
  } else if (prefix == "Aten" || prefix == "VF") {
    add("aten", name);
  } else if (prefix == "Tensor" && TensorOps().count(name) > 0) {
    add_all("aten", TensorOps().find(name)->second);
  } else if (auto it = FunctionalOps().find(name);
             it != FunctionalOps().end() && prefix != "Tensor") {
    add_all("aten", it->second);  // Functional.X, Torch.X and bare X alike
  } else {
    add(bare ? "" : "aten", name);  // a bare name: any namespace
  }
}

std::size_t NamePattern::ParseCallPart(const std::vector<absl::string_view>& parts, std::size_t i) {
  uint64_t number;
  if (i < parts.size() && IsNumber(parts[i], &number)) {
    index_ = number;
    ++i;
  }
  if (i < parts.size() && IsPhase(parts[i])) {
    phase_ = parts[i] == "forward" ? wire::kPhaseForward : wire::kPhaseBackward;
    ++i;
    if (*phase_ == wire::kPhaseBackward && i < parts.size() && IsNumber(parts[i], &number)) {
      backward_index_ = static_cast<uint32_t>(number);
      ++i;
    }
  }
  return i;
}

absl::StatusOr<NamePattern> NamePattern::Parse(absl::string_view text) {
  NamePattern p;
  p.text_ = std::string(absl::StripAsciiWhitespace(text));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", p.text_, "\": ", why));
  };
  if (p.text_.empty()) return absl::InvalidArgumentError("an empty name");
  if (p.text_.size() > 256) return bad("longer than 256 characters");

  absl::string_view rest = p.text_;
  std::string ns;
  enum class Form { kOperator, kMsprobe, kBare } form = Form::kBare;
  absl::string_view prefix;
  if (const std::size_t colon = rest.find("::"); colon != absl::string_view::npos) {
    form = Form::kOperator;
    ns = std::string(rest.substr(0, colon));
    if (!IsIdentifier(ns)) return bad("not a namespace before \"::\"");
    rest.remove_prefix(colon + 2);
    p.prefix_ = absl::StrCat(ns, "::");
  } else {
    for (absl::string_view candidate : kPrefixes) {
      if (absl::StartsWith(rest, candidate) && rest.size() > candidate.size() &&
          rest[candidate.size()] == '.') {
        form = Form::kMsprobe;
        prefix = candidate;
        rest.remove_prefix(candidate.size() + 1);
        p.prefix_ = absl::StrCat(candidate, ".");
        break;
      }
    }
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, '.');
  const std::string name(parts[0]);
  if (!IsIdentifier(name)) return bad("not an operator or API name");
  std::size_t i = 1;
  std::optional<std::string> overload;
  const bool overloads = form == Form::kOperator || prefix == "Aten";
  if (overloads && i < parts.size() && !IsNumber(parts[i]) && !IsPhase(parts[i])) {
    if (!IsIdentifier(parts[i])) return bad("not an overload name");
    overload = parts[i] == "default" ? "" : std::string(parts[i]);
    ++i;
  }
  i = p.ParseCallPart(parts, i);
  if (i < parts.size()) {
    return bad(absl::StrCat("unexpected \"", parts[i],
                            "\" (a name is [ns::]op[.overload][.index][.forward|.backward[.k]])"));
  }

  p.AddOperators(form == Form::kOperator ? ns : "", prefix, name, overload, form == Form::kBare);
  if (form == Form::kMsprobe && prefix != "Aten") p.msprobe_api_ = absl::StrCat(prefix, ".", name);
  return p;
}

bool NamePattern::MatchesOp(absl::string_view op, absl::string_view overload) const {
  const std::size_t colon = op.rfind("::");
  const absl::string_view ns = colon == absl::string_view::npos ? "" : op.substr(0, colon);
  const absl::string_view name = BareOpName(op);
  for (const Op& want : ops_) {
    if (!want.ns.empty() && want.ns != ns) continue;
    // "add" also selects the in-place "add_"; "add_" only itself.
    const bool same =
        name == want.name || (name.size() == want.name.size() + 1 && absl::EndsWith(name, "_") &&
                              absl::StartsWith(name, want.name) && !absl::EndsWith(want.name, "_"));
    if (!same) continue;
    if (want.exact_overload && want.overload != overload) continue;
    return true;
  }
  return false;
}

bool NamePattern::Matches(const CallNaming& call) const {
  if (phase_ && *phase_ != call.phase()) return false;
  const bool linked = call.phase() == wire::kPhaseBackward && !call.forward_op_name().empty();
  if (backward_index_ && (!linked || call.backward_index() != *backward_index_)) return false;
  if (!msprobe_api_.empty() && !call.api().empty()) {
    // Named at its call site: msprobe's API as the training called it ("Tensor.matmul" is not
    // "Torch.matmul") and its index among that API's calls in the step (a linked backward
    // call carries its forward call's).
    return call.api() == msprobe_api_ && (!index_ || call.api_index() == *index_);
  }
  if (index_) {
    // A call index names one forward call: the call itself, or a linked backward call's.
    if (call.call_index() != *index_) return false;
    return linked ? MatchesOp(call.forward_op_name(), call.forward_overload())
                  : MatchesOp(call.op_name(), call.overload());
  }
  return MatchesOp(call.op_name(), call.overload()) ||
         (linked && MatchesOp(call.forward_op_name(), call.forward_overload()));
}

NamePattern NamePattern::Substring(absl::string_view text) {
  NamePattern p;
  p.text_ = std::string(text);
  return p;
}

bool NamePattern::Known(const OpNameIndex& known) const {
  if (ops_.empty()) return known.AnyContains(text_);
  for (const Op& op : ops_) {
    if (known.Has(op.ns, op.name)) return true;
  }
  return false;
}

std::vector<std::string> NamePattern::Suggestions(const OpNameIndex& known) const {
  // Suggested from what the user typed (the API name, not the operator it maps to), in the same
  // form.
  absl::string_view typed = text_;
  typed.remove_prefix(std::min(typed.size(), prefix_.size()));
  typed = typed.substr(0, typed.find('.'));
  std::vector<std::string> out;
  for (std::string& s : known.Closest(typed)) out.push_back(absl::StrCat(prefix_, s));
  return out;
}

// ---- NameList -----------------------------------------------------------------------------------

absl::StatusOr<NameList> NameList::Parse(const std::vector<std::string>& names, bool substrings) {
  NameList list;
  list.substrings_ = substrings;
  for (const std::string& text : names) {
    absl::StatusOr<NamePattern> p = NamePattern::Parse(text);
    if (!p.ok() && substrings && !text.empty()) {
      list.patterns_.push_back(NamePattern::Substring(text));  // "conv2d.0.for": a substring
      continue;
    }
    if (!p.ok()) return p.status();
    list.patterns_.push_back(*std::move(p));
  }
  return list;
}

bool NameList::Matches(const CallNaming& call) const {
  for (const NamePattern& p : patterns_) {
    if (p.Matches(call)) return true;
  }
  if (!substrings_) return false;
  const std::string api = ApiName(call), msprobe = MsprobeName(call);
  for (const NamePattern& p : patterns_) {
    if (absl::StrContains(api, p.text()) || absl::StrContains(msprobe, p.text())) return true;
  }
  return false;
}

std::vector<std::string> NameList::Unknown(const OpNameIndex& known) const {
  std::vector<std::string> out;
  for (const NamePattern& p : patterns_) {
    if (p.Known(known) || (substrings_ && known.AnyContains(p.text()))) continue;
    const std::vector<std::string> near = p.Suggestions(known);
    out.push_back(absl::StrCat("\"", p.text(), "\" selects no operator this process knows",
                               near.empty() ? "" : "; closest: ", absl::StrJoin(near, ", ")));
  }
  return out;
}

}  // namespace parity::common
