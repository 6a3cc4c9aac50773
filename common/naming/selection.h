// The selection language: the names a user may write where a config selects calls
// (tensor.scope, tensor.list, the white and black lists of agent and server) and what each
// selects. Torch-free: the operators a process knows come in as an OpNameIndex. docs/migration.md
// lists every form with examples; msprobe's API names themselves are made in
// common/naming/api_names.h.
//
//   form                                   examples                        selects
//   Parity's call names (the CSVs')        aten::add.Tensor.3              that call (and its
//   backward)
//                                          aten::softmax.int.0.backward.1  that backward call
//   an operator, any overload or one       aten::add   aten::add.Tensor    its calls
//   a bare operator name (any namespace)   gelu   add_   npu_rms_norm      its calls
//   msprobe's API names                    Functional.linear.0.forward     forward call 0 of linear
//                                          Torch.matmul   Tensor.add_      their calls
//                                          Aten.mm.default   NPU.npu_fusion_attention
//   msprobe's composite APIs, bare too     cross_entropy, Functional.pad   the ops they run as
//
// A name without a call index selects every call of its operators, and the backward calls linked
// to them; "X" also selects the in-place "X_" ("add" selects aten::add_), "X_" only itself. A
// call index selects one forward call per step and the backward calls linked to it; ".forward" /
// ".backward" keep one phase, ".backward.k" one backward call.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/naming/naming.h"
#include "common/wire/fields.h"

namespace parity::common {

// The operators a process knows ("aten::add", "npu::npu_rms_norm"), for telling a name that
// selects nothing and suggesting the closest.
class OpNameIndex {
 public:
  explicit OpNameIndex(const std::vector<std::string>& op_names);
  // `ns` empty: any namespace.
  bool Has(absl::string_view ns, absl::string_view name) const;
  // Some operator's full name ("aten::add.Tensor" aside: "aten::add") contains `text`.
  bool AnyContains(absl::string_view text) const;
  // Up to `n` known names (bare, or msprobe's functional names) closest to `name`, nearest first.
  std::vector<std::string> Closest(absl::string_view name, std::size_t n = 3) const;

 private:
  std::unordered_set<std::string> full_;  // "aten::add"
  std::unordered_set<std::string> bare_;  // "add"
  std::vector<std::string> suggestions_;  // bare names and msprobe's API names, sorted
};

class NamePattern {
 public:
  // Parses one name in any form above. Errors name what is wrong ("empty", a stray part); a
  // well-formed name of an operator nobody has is not an error here (Unknown below says so).
  static absl::StatusOr<NamePattern> Parse(absl::string_view text);
  // A `tensor.list` entry that is no name, matched only as a substring.
  static NamePattern Substring(absl::string_view text);

  bool Matches(const CallNaming& call) const;
  // False when no operator it names is in `known`.
  bool Known(const OpNameIndex& known) const;  // a substring: some operator contains it
  // The closest known names, in the form the user wrote ("Functional.linear", "aten::linear").
  std::vector<std::string> Suggestions(const OpNameIndex& known) const;
  const std::string& text() const { return text_; }

 private:
  struct Op {
    std::string ns;        // "aten"; empty: any namespace
    std::string name;      // "add"
    std::string overload;  // with `exact_overload`: "" is the default overload
    bool exact_overload = false;
  };
  bool MatchesOp(absl::string_view op, absl::string_view overload) const;
  // Reads the call's part of a name from parts[i]: [.index][.forward|.backward[.k]]; returns the
  // index of the first part it did not read.
  std::size_t ParseCallPart(const std::vector<absl::string_view>& parts, std::size_t i);
  // The operators a parsed name selects: `ns::name` when it named a namespace; else by msprobe's
  // `prefix` ("Functional", "Tensor", "NPU", ...; empty for a `bare` name: any namespace).
  void AddOperators(const std::string& ns, absl::string_view prefix, const std::string& name,
                    const std::optional<std::string>& overload, bool bare);

  std::string text_;
  std::string prefix_;  // the form, for suggestions: "aten::", "Functional.", ""
  // msprobe's API the name was written with ("Tensor.matmul"): a call named at its Python call
  // site (ApiCall.api) is selected by it and its own counter, as msprobe counts each API name.
  std::string msprobe_api_;
  std::vector<Op> ops_;
  std::optional<uint64_t> index_;
  std::optional<wire::Phase> phase_;
  std::optional<uint32_t> backward_index_;
};

// A config's list of names. With `substrings` (msprobe's `list`), an entry also selects the calls
// whose Parity or msprobe name contains it.
class NameList {
 public:
  static absl::StatusOr<NameList> Parse(const std::vector<std::string>& names,
                                        bool substrings = false);
  bool empty() const { return patterns_.empty(); }
  bool Matches(const CallNaming& call) const;
  // One line per name that selects nothing `known` has: "\"Functional.lienar\" selects no
  // operator; closest: Functional.linear, Functional.bilinear".
  std::vector<std::string> Unknown(const OpNameIndex& known) const;
  const std::vector<NamePattern>& patterns() const { return patterns_; }

 private:
  std::vector<NamePattern> patterns_;
  bool substrings_ = false;
};

}  // namespace parity::common
