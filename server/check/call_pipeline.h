// The server's per-call step, owned in one place: the run_ut lists, the replay and comparison
// (CallChecker), the verdict, the result rows (ResultWriter), the error data and the call's
// metrics. The service's worker makes the ServerCall and encodes the verdict this returns
// (server/service/stream_reactor.cc); the composition root (server/app/server.cc) only builds the
// pipeline and hands its Check to the service.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/naming/selection.h"
#include "server/call/call_sink.h"
#include "server/call/server_call.h"
#include "server/check/pipeline_options.h"
#include "server/results/result_rows.h"

namespace parity::common {
class BlobSource;
}  // namespace parity::common

namespace parity::server {

class CallChecker;
class ErrorData;
class ResultWriter;
class ServerMetrics;
class StandardsTable;

// The service's CallSink in a server: each worker hands it the calls it runs.
class CallPipeline final : public CallSink {
 public:
  // Builds the checker, the result writer and the error data from `options` (the lists' names
  // no loaded operator has are warned about); `limits` are parity.limits.*, one message's
  // tensors. `standards` and `metrics` outlive the pipeline.
  static absl::StatusOr<std::unique_ptr<CallPipeline>> Create(PipelineOptions options,
                                                              const common::DecodeLimits& limits,
                                                              const StandardsTable& standards,
                                                              ServerMetrics& metrics);
  ~CallPipeline() override;

  // Checks one call and returns what it decided: SKIP for a call the lists leave out; else replayed
  // and compared, its rows written, its error data saved (an error with its values kept), its
  // metrics counted. Never throws (the last line of defence is a SKIP naming the error).
  // Thread-safe: every worker calls it.
  CallOutcome Run(const CallOrigin& origin, const ServerCall& call,
                  const common::BlobSource& blobs) override;

  // A stream of `origin`'s rank ended after every call it sent was checked: the rank's waiting
  // result rows are written. Never throws.
  void EndOfStream(const CallOrigin& origin);

  const CallChecker& checker() const { return *checker_; }
  std::vector<std::string> ResultPaths() const;

 private:
  explicit CallPipeline(ServerMetrics& metrics);
  // Counts a write of result rows that failed (parity_server_result_rows_lost_total, by the
  // status's cause) and logs it, at most every 10 s.
  void CountWriteFailure(const absl::Status& written);
  // A call the pipeline leaves unchecked (a list's SKIP, a failure inside the server): counted
  // and answered SKIP with `message` and `code`.
  CallOutcome Skipped(const CallOrigin& origin, const ServerCall& call, std::string message,
                      absl::StatusCode code = absl::StatusCode::kOk);

  ServerMetrics& metrics_;
  common::NameList white_list_, black_list_;
  std::unique_ptr<CallChecker> checker_;
  std::unique_ptr<ResultWriter> writer_;
  std::unique_ptr<ErrorData> error_data_;  // null when parity.save_error_data is off
};

}  // namespace parity::server
