#include "server/check/call_pipeline.h"

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "server/metrics/metrics.h"
#include "server/replay/call_checker.h"
#include "server/replay/replay_errors.h"
#include "server/results/append_file.h"
#include "server/results/error_data.h"
#include "server/results/result_writer.h"

namespace parity::server {

std::string PipelineOptions::ErrorDataPath() const {
  const std::filesystem::path path(error_data_path);
  if (path.is_absolute()) return path.lexically_normal().string();
  return (std::filesystem::path(output_dir) / path).lexically_normal().string();
}

namespace {

// The checking thread's CPU per stage (parity_server_stage_cpu_seconds_total), for the stages
// that ran.
void CountStageCpu(const CallOutcome::StageCpu& cpu, double write_cpu, ServerMetrics& metrics) {
  using Stage = ServerMetrics::Stage;
  metrics.StageCpu(Stage::kDecode, cpu.decode);
  if (cpu.random > 0) metrics.StageCpu(Stage::kRandom, cpu.random);
  if (cpu.bench_ran) metrics.StageCpu(Stage::kBench, cpu.bench);
  if (cpu.golden_ran) metrics.StageCpu(Stage::kGolden, cpu.golden);
  if (cpu.bench_ran || cpu.golden_ran) metrics.StageCpu(Stage::kCompare, cpu.compare);
  metrics.StageCpu(Stage::kWrite, write_cpu);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CallPipeline>> CallPipeline::Create(
    PipelineOptions options, const common::DecodeLimits& limits, const StandardsTable& standards,
    ServerMetrics& metrics) {
  std::unique_ptr<CallPipeline> p(new CallPipeline(metrics));
  PARITY_ASSIGN_OR_RETURN(p->white_list_, common::NameList::Parse(options.white_list));
  PARITY_ASSIGN_OR_RETURN(p->black_list_, common::NameList::Parse(options.black_list));
  if (!p->white_list_.empty() || !p->black_list_.empty()) {
    const common::OpNameIndex known(KnownOperatorNames());
    for (const auto& [key, list] : {std::pair{"run_ut.white_list", &p->white_list_},
                                    std::pair{"run_ut.black_list", &p->black_list_}}) {
      for (const std::string& line : list->Unknown(known)) {
        common::LogWarning(absl::StrCat(key, ": ", line));
      }
    }
  }
  CheckerOptions& checker = options.checker;
  checker.limits = limits;
  checker.save_error_data = options.save_error_data;
  PARITY_ASSIGN_OR_RETURN(p->checker_, CallChecker::Create(checker, standards));
  if (const auto& low = p->checker_->low_precision_gemm_dtypes(); !low.empty()) {
    common::LogInfo(absl::StrCat(
        "bench ", p->checker_->bench_device(), ": libtorch's ", absl::StrJoin(low, " and "),
        " matrix products on this CPU round their partial sums to that dtype; the bench "
        "computes float16 and bfloat16 GEMMs in float32 and rounds once, as an accelerator "
        "does (docs/results.md#low-precision-gemms)"));
  }
  PARITY_ASSIGN_OR_RETURN(p->writer_, ResultWriter::Create(options.output_dir, standards));
  ServerMetrics* lost = &metrics;
  p->writer_->OnVanished([lost](uint64_t calls) { lost->ResultRowsLost("vanished", calls); });
  if (options.save_error_data) {
    ErrorDataOptions& error_data = options.error_data;
    error_data.path = options.ErrorDataPath();
    ServerMetrics* counted = &metrics;
    p->error_data_ = std::make_unique<ErrorData>(
        error_data, standards,
        [counted](ErrorDataOutcome outcome) { counted->ErrorData(ErrorDataOutcomeName(outcome)); });
  }
  return p;
}

CallPipeline::CallPipeline(ServerMetrics& metrics) : metrics_(metrics) {}

CallPipeline::~CallPipeline() = default;

std::vector<std::string> CallPipeline::ResultPaths() const { return writer_->Paths(); }

void CallPipeline::CountWriteFailure(const absl::Status& written) {
  static common::RateLimiter write_errors(std::chrono::seconds(10));
  metrics_.ResultRowsLost(RowsLostReason(written));
  uint64_t suppressed = 0;
  if (write_errors.Allow(&suppressed)) {
    common::LogError(
        absl::StrCat("result files: ", written.ToString(), " (", suppressed, " more suppressed)"));
  }
}

CallOutcome CallPipeline::Skipped(const CallOrigin& origin, const ServerCall& call,
                                  std::string message, absl::StatusCode code) {
  metrics_.CallChecked(call.id.phase, CheckStatus::kSkip, call.id.op_name, 0, 0);
  metrics_.RankChecked(origin.rank, CheckStatus::kSkip);
  CallOutcome skipped;
  skipped.status = CheckStatus::kSkip;
  skipped.message = std::move(message);
  skipped.error_code = code;
  return skipped;
}

CallOutcome CallPipeline::Run(const CallOrigin& origin, const ServerCall& call,
                              const common::BlobSource& blobs) {
  try {
    const bool white = !white_list_.empty() && !white_list_.Matches(call.id);
    if (white || black_list_.Matches(call.id)) {
      return Skipped(origin, call,
                     white ? "not in the server's white_list" : "in the server's black_list");
    }
    CallOutcome check = checker_->Judge(call, &blobs);
    double write_cpu = 0;
    {
      common::ScopedCpuTimer timer(&write_cpu);
      if (absl::Status written = writer_->Write(origin, call, check); !written.ok()) {
        CountWriteFailure(written);
      }
      if (check.values && error_data_) error_data_->Save(origin, call, check);
    }
    CountStageCpu(check.cpu, write_cpu, metrics_);
    metrics_.CallChecked(call.id.phase, check.status, call.id.op_name, check.replay_seconds,
                         check.compare_seconds);
    metrics_.RankChecked(origin.rank, check.status);
    if (!check.inputs_written.empty()) metrics_.InputsWritten();
    if (!check.unchecked_writes.empty()) metrics_.UncheckedWrites();
    check.values.reset();  // written: the call's tensors go back now, not after the verdict
    return check;
  } catch (const std::exception& e) {
    // CallChecker catches the replays' errors itself; this is the last line of defence (an
    // allocation failure comparing or writing, say). The call is not checked: SKIP, never a
    // verdict on the call itself, with RESOURCE_EXHAUSTED when memory ran out, else INTERNAL.
    const bool memory = IsOutOfMemory(e);
    return Skipped(origin, call,
                   absl::StrCat(memory ? "not checked: the server ran out of memory: "
                                       : "not checked: internal error while checking: ",
                                ErrorText(e)),
                   memory ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal);
  }
}

void CallPipeline::EndOfStream(const CallOrigin& origin) {
  if (absl::Status written = writer_->EndOfStream(origin.rank); !written.ok()) {
    CountWriteFailure(written);
  }
}

}  // namespace parity::server
