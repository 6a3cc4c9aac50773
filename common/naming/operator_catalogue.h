// The operator catalogue: what the agent and the server decide about an operator by its name
// alone, as data (common/naming/operators.json, built in; a user's file adds entries): never
// replayed (uninitialised output), a communication op (its result depends on the other ranks),
// a random op and its family. The standards an op is judged by are the server's
// (server/data/standards.json). docs/operators.md#the-operator-catalogue.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/naming/random_ops.h"

namespace parity::common {

// Everything the catalogue says of one operator, found with one lookup.
struct OperatorClass {
  bool communication = false;
  // What a never-replayed op returns ("uninitialised output"); null when it can be replayed.
  const std::string* never_replayed = nullptr;
  RandomFamily random_family = RandomFamily::kNone;
};

class OperatorCatalogue {
 public:
  // Reads a catalogue file's text; INVALID_ARGUMENT naming `source` and the key for anything
  // malformed: an unknown section or family, a name listed twice.
  static absl::StatusOr<OperatorCatalogue> Parse(absl::string_view json_text,
                                                 absl::string_view source);
  // The built-in catalogue.
  static OperatorCatalogue BuiltIn();

  // Adds `other`'s entries; INVALID_ARGUMENT when an operator would be classified two ways.
  absl::Status Add(const OperatorCatalogue& other, absl::string_view source);

  // `op_name` ("aten::dropout") classified; valid while this catalogue is.
  OperatorClass Classify(absl::string_view op_name) const;
  // Why `op_name` ("aten::empty") is never replayed: "aten::empty returns uninitialised output;
  // nothing to compare"; empty when it can be.
  std::string SkipReason(absl::string_view op_name) const;
  bool IsCommunication(absl::string_view op_name) const;
  RandomFamily RandomFamilyOf(absl::string_view op_name) const;
  // Bare names of every random op, sorted.
  std::vector<std::string> RandomOpNames() const;

 private:
  struct Entry {
    std::string never_replayed;  // what it returns; empty when it can be replayed
    RandomFamily random_family = RandomFamily::kNone;
  };
  std::map<std::string, Entry, std::less<>> by_bare_name_;
  std::set<std::string, std::less<>> communication_namespaces_;  // "c10d"
  std::set<std::string, std::less<>> communication_ops_;         // "aten::all_reduce"
};

// The process's catalogue: the built-in one, plus what AddToOperatorCatalogue added.
const OperatorCatalogue& ProcessOperatorCatalogue();
// Adds the catalogue file at `path` to the process's (parity.operator_catalogue), before the
// first call is checked or captured. INVALID_ARGUMENT / NOT_FOUND with the file's name.
absl::Status AddToOperatorCatalogue(const std::string& path);

// The skip reason of `op_name` classified never replayed because it returns `what`.
std::string NeverReplayedReason(absl::string_view op_name, absl::string_view what);

// The process catalogue's answers (ProcessOperatorCatalogue() stays valid for the process).
OperatorClass ClassifyOp(absl::string_view op_name);
RandomFamily RandomFamilyOf(absl::string_view op_name);
std::vector<std::string> RandomOpNames();

// A family's name in the catalogue ("dropout", "unchecked"); kNone has none.
absl::string_view RandomFamilyName(RandomFamily family);

}  // namespace parity::common
