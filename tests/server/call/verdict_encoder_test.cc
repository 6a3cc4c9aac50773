// The one Verdict encoder (server/call/verdict_encoder.h) keeps the proto's contract whatever a
// check's path left in it: error_code only on SKIP and REJECTED, 0 on every outcome (a SKIP turned
// into an error, such as an operator the server cannot replay whose call wrote its input, keeps no
// code of the SKIP); the call-level failed_metric only where inputs_written decided the status.
#include "server/call/verdict_encoder.h"
#include "parity/v1/parity.pb.h"

#include <gtest/gtest.h>

namespace parity::server {
namespace {

v1::ApiCall Wire() {
  v1::ApiCall c;
  c.set_op_name("aten::gelu");
  c.set_phase(v1::PHASE_FORWARD);
  c.set_sequence(7);
  return c;
}

TEST(VerdictEncoderTest, ErrorCodeOnlyOnSkipAndRejected) {
  const v1::ApiCall wire = Wire();  // ServerCall borrows it
  const ServerCall call(wire);
  for (CheckStatus status : {CheckStatus::kPass, CheckStatus::kWarning, CheckStatus::kError,
                             CheckStatus::kSkip, CheckStatus::kRejected}) {
    for (absl::StatusCode code : {absl::StatusCode::kOk, absl::StatusCode::kUnimplemented,
                                  absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
                                  absl::StatusCode::kInvalidArgument}) {
      CallOutcome check;
      check.status = status;
      check.error_code = code;
      const bool coded = status == CheckStatus::kSkip || status == CheckStatus::kRejected;
      EXPECT_EQ(ToVerdict(call, check).error_code(), coded ? static_cast<int>(code) : 0)
          << static_cast<int>(status) << " " << static_cast<int>(code);
      EXPECT_EQ(DecidedVerdict(call, status, "", code).error_code(),
                coded ? static_cast<int>(code) : 0);
    }
  }
}

TEST(VerdictEncoderTest, InputWrittenIsTheCallsFailedMetric) {
  const v1::ApiCall wire = Wire();
  const ServerCall call(wire);
  CallOutcome check;
  check.status = CheckStatus::kError;
  EXPECT_EQ(ToVerdict(call, check).failed_metric(), "");  // an output's error: its own metric
  check.inputs_written.push_back({/*index=*/1, "self", /*changed_elements=*/3, /*elements=*/8});
  const v1::Verdict v = ToVerdict(call, check);
  EXPECT_EQ(v.failed_metric(), "input_written");
  ASSERT_EQ(v.inputs_written_size(), 1);
  EXPECT_EQ(v.inputs_written(0).index(), 1u);
  EXPECT_EQ(v.inputs_written(0).name(), "self");
  EXPECT_EQ(v.inputs_written(0).changed_elements(), 3u);
  EXPECT_EQ(v.inputs_written(0).elements(), 8u);
}

}  // namespace
}  // namespace parity::server
