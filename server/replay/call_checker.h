// Checks one ApiCall: decode, replay on the bench device and as a float64 golden on CPU through
// the libtorch dispatcher, judge every output by its API's standard, aggregate. The only server
// code that includes libtorch (in its .cc files); this header is torch-free.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/limits.h"
#include "common/op_registry.h"
#include "common/torch/value_codec.h"
#include "parity/v1/parity.pb.h"
#include "server/compare/judge.h"
#include "server/compare/standards.h"

namespace parity::server {

struct CheckerOptions {
  std::string bench_device = "auto";  // "auto" (CUDA when present), "cpu", "cuda", "cuda:N"
  bool golden = true;
  common::DecodeLimits limits;
};

// Per-output details kept for the result files beyond what the Verdict carries.
struct CheckedOutput {
  v1::OutputVerdict verdict;
  v1::VerdictStatus two_way_status = v1::VERDICT_STATUS_UNSPECIFIED;
  std::string two_way_message;
  v1::DType bench_dtype = v1::DTYPE_UNSPECIFIED;
  bool has_device_metrics = false;
  // Three-way ratios (benchmark, ULP standards) with their pass/fail, by metric name.
  std::vector<std::pair<std::string, Ratio>> ratios;
};

struct CheckResult {
  v1::Verdict verdict;
  std::vector<CheckedOutput> outputs;
};

class CallChecker {
 public:
  // Resolves the bench device; INVALID_ARGUMENT for an unknown or absent device.
  static absl::StatusOr<std::unique_ptr<CallChecker>> Create(const CheckerOptions& options,
                                                             const StandardsTable& standards);
  ~CallChecker();

  // Checks one call. Never throws: malformed calls give VERDICT_STATUS_REJECTED with a gRPC
  // code, ops that cannot be replayed give SKIP with the reason. `blobs` resolves chunked
  // tensors (may be null). Thread-safe: many workers may share one checker.
  CheckResult Check(const v1::ApiCall& call, const common::BlobSource* blobs = nullptr) const;

  // "cpu" or "cuda:0".
  const std::string& bench_device() const;

 private:
  struct Impl;
  explicit CallChecker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Why an op is never replayed (random, uninitialised output, side effects); empty if it is.
using common::SkipReasonForOp;

}  // namespace parity::server
