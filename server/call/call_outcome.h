// What a check decided about one call: the types the result writers, the error data and the
// verdict read. Torch-free, and apart from the checker (server/replay/call_checker.h), so the
// results do not include it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/wire/fields.h"
#include "server/compare/judge.h"

namespace parity::server {

// One output of a call, typed to the end: the writers and the verdict read the judgement's enum
// standard and metric structs; names are made only where text is written
// (server/call/verdict_encoder.h, server/results/).
struct OutputOutcome {
  uint32_t index = 0;  // position among the call's outputs, nested lists flattened
  OutputJudgement judgement;
  wire::DType dtype = wire::kDTypeUnspecified;        // the device output's
  wire::DType bench_dtype = wire::kDTypeUnspecified;  // the bench output's, when it ran
  // What the device output was compared against (the judgement's `device` metrics): the
  // golden's dtype when it ran, else the bench's. The details CSV's "Bench Dtype", as msprobe
  // fills it (its bench is the upcast golden).
  wire::DType reference_dtype = wire::kDTypeUnspecified;
  std::vector<int64_t> shape;  // the device output's
  bool judged = false;         // compared as tensors (the two-way Status column applies)
  // A Python value's type as msprobe writes it in both dtype columns ("<class 'float'>");
  // empty for tensors.
  std::string value_type;
};

// The values of a checked call (server/replay/call_values.h).
struct CallValues;

// Everything decided about one call.
inline constexpr std::size_t kMaxUncheckedWrites = 16;
inline constexpr std::size_t kMaxUncheckedWriteBytes = 1024;

// A read-only argument the device changed during the call, as the agent measured it
// (ApiCall.inputs_written).
struct InputWritten {
  uint32_t index = 0;  // in the call's inputs
  std::string name;    // the schema's argument name
  uint64_t changed_elements = 0;
  uint64_t elements = 0;
};

struct CallOutcome {
  CheckStatus status = CheckStatus::kUnspecified;
  std::string message;
  // REJECTED: why (INVALID_ARGUMENT, RESOURCE_EXHAUSTED); SKIP of an op the bench cannot
  // replay: UNIMPLEMENTED; else OK. Encoded only on SKIP and REJECTED (verdict_encoder.cc).
  absl::StatusCode error_code = absl::StatusCode::kOk;
  double replay_seconds = 0;
  double compare_seconds = 0;
  // CPU seconds of the checking thread in each stage (libtorch's intra-op threads, when a replay
  // uses them, are not included), and which replays ran: the cost profile's counters.
  struct StageCpu {
    double decode = 0, bench = 0, golden = 0, compare = 0, random = 0;  // random: a random op
    double to_host = 0;  // of compare: the bench's and golden's outputs copied to the host
    bool bench_ran = false, golden_ran = false;
  } cpu;
  std::vector<OutputOutcome> outputs;
  // Read-only arguments the device changed during the call (ApiCall.inputs_written): the call is
  // an error whatever its outputs' comparison says.
  std::vector<InputWritten> inputs_written;
  // What the agent did not compare of what the call must leave unchanged (ApiCall
  // .unchecked_writes: at most kMaxUncheckedWrites lines of kMaxUncheckedWriteBytes).
  std::vector<std::string> unchecked_writes;
  // Its inputs and the three sets of outputs: for a call judged error when the checker keeps
  // them (parity.save_error_data, server/replay/call_checker.h), else null.
  std::shared_ptr<const CallValues> values;
};

// The metric that decided the call's status where no output's did: input_written for a call that
// changed a read-only argument (an error whatever its outputs say); empty otherwise.
inline absl::string_view CallFailedMetric(const CallOutcome& check) {
  return check.status == CheckStatus::kError && !check.inputs_written.empty()
             ? MetricName(Metric::kInputWritten)
             : absl::string_view();
}

// An output's metrics by the names the verdict and the JSON-lines record give them, in the order
// they are set (a later value of a name replaces an earlier one).
std::vector<std::pair<std::string, double>> OutputMetricValues(const OutputJudgement& judgement);

}  // namespace parity::server
