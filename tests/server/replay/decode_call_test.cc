// A call's values reach the checker two ways: decoded from the message (DecodeCall), or given
// decoded (DecodedFromValues, parity-repro's route: the error data's files loaded back). Both
// must give one verdict, and what the later stages read of a call must come from the decoded
// call, not from the message.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"
#include "server/replay/call_checker.h"
#include "server/replay/call_values.h"
#include "server/replay/stages.h"
#include "tests/testing/op_cases.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;
using testing::OpCase;
using testing::Stack;

std::unique_ptr<CallChecker> CpuChecker() {
  server::CheckerOptions options;
  options.bench_device = "cpu";
  options.save_error_data = true;  // keep the values of calls judged error
  auto checker = CallChecker::Create(options, StandardsTable::Default());
  EXPECT_TRUE(checker.ok()) << checker.status();
  return checker.ok() ? *std::move(checker) : nullptr;
}

// A planted fault on every floating tensor the op returned, so that the call is judged error
// and its values are kept.
void Skew(Stack& outputs) {
  for (c10::IValue& v : outputs) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point()) {
      v = v.toTensor() * 1.01 + 0.01;
    }
  }
}

Stack Load(const std::string& dir, const std::vector<std::string>& files) {
  Stack values;
  for (const std::string& f : files) {
    absl::StatusOr<c10::IValue> v = LoadValue(dir + "/" + f);
    EXPECT_TRUE(v.ok()) << v.status();
    values.push_back(v.ok() ? *std::move(v) : c10::IValue());
  }
  return values;
}

// parity-repro's route, over the clean cases' 30+ operators (lists of ints and of tensors,
// optional and undefined tensors, scalars, backward calls): the values of each call judged
// error, written as error data and loaded back, give the checker the verdict the message gave,
// output by output, metric by metric.
TEST(DecodedFromValuesTest, SavedAndLoadedValuesGiveTheMessagesVerdict) {
  std::unique_ptr<CallChecker> checker = CpuChecker();
  ASSERT_NE(checker, nullptr);
  const std::string dir = ::testing::TempDir() + "/parity_decoded_from_values";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  int round_trips = 0;
  for (const OpCase& c : testing::CleanCases()) {
    SCOPED_TRACE(c.name + "." + c.overload);
    const v1::ApiCall call = testing::BuildCall(c.name, c.overload, c.args(), c.phase, Skew);
    const CallOutcome from_message = checker->Judge(ServerCall(call));
    if (from_message.values == nullptr) continue;  // not an error (integer outputs): not kept
    absl::StatusOr<SavedFiles> files =
        SaveCallValues(*from_message.values, dir, absl::StrCat("call", round_trips));
    ASSERT_TRUE(files.ok()) << files.status();
    absl::StatusOr<c10::OperatorHandle> op = ResolveOp(call.op_name(), call.overload());
    ASSERT_TRUE(op.ok());
    absl::StatusOr<DecodedCall> decoded =
        DecodedFromValues(op->schema(), Load(dir, files->inputs), Load(dir, files->device));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    v1::ApiCall identity = call;  // the call without its values: they come decoded
    identity.clear_inputs();
    identity.clear_outputs();
    const CallOutcome from_files = checker->Judge(ServerCall(identity), *std::move(decoded));
    EXPECT_EQ(from_files.status, from_message.status) << from_files.message;
    EXPECT_EQ(from_files.message, from_message.message);
    ASSERT_EQ(from_files.outputs.size(), from_message.outputs.size());
    for (std::size_t i = 0; i < from_files.outputs.size(); ++i) {
      const OutputJudgement& a = from_files.outputs[i].judgement;
      const OutputJudgement& b = from_message.outputs[i].judgement;
      EXPECT_EQ(a.status, b.status) << "output " << i;
      EXPECT_EQ(a.standard, b.standard) << "output " << i;
      EXPECT_EQ(a.failed_metric, b.failed_metric) << "output " << i;
      ASSERT_EQ(a.device.has_value(), b.device.has_value());
      if (a.device) {
        EXPECT_EQ(a.device->max_abs_error, b.device->max_abs_error) << "output " << i;
      }
    }
    ++round_trips;
  }
  EXPECT_GE(round_trips, 25) << "most clean cases return a floating tensor the fault skews";
}

// Values that do not fit the schema are the argument's clear error, as from the message.
TEST(DecodedFromValuesTest, ValuesThatDoNotFitTheSchemaAreRefused) {
  absl::StatusOr<c10::OperatorHandle> op = ResolveOp("aten::add", "Tensor");
  ASSERT_TRUE(op.ok());
  const at::Tensor x = testing::R({4}, 1);
  absl::StatusOr<DecodedCall> d = DecodedFromValues(op->schema(), {x, c10::IValue("two")}, {x});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("arguments do not match aten::add.Tensor"));
  d = DecodedFromValues(op->schema(), {x}, {x});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("(other)"));
  // The default `alpha` is filled in; the outputs are all decoded.
  d = DecodedFromValues(op->schema(), {x, x}, {x});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->inputs.size(), 3u);
  ASSERT_EQ(d->output_form.size(), 1u);
  EXPECT_TRUE(d->output_form[0].decoded());
}

// What a statistics-only output and a strided input were is read once, by the decoder: the
// judge and the random replay then use the decoded call.
TEST(DecodeCallTest, StatsOnlyOutputsAndStridedInputsAreRecordedInTheDecodedCall) {
  const at::Tensor x = testing::R({8, 6}, 2);
  v1::ApiCall call = testing::BuildCall("aten::relu", "", {x.t()});
  ASSERT_EQ(call.outputs_size(), 1);
  v1::Tensor* out = call.mutable_outputs(0)->mutable_tensor();
  out->set_form(v1::DATA_FORM_STATS_ONLY);
  out->clear_data();
  out->mutable_stats()->set_mean(0.25);
  out->mutable_stats()->set_l2_norm(3.0);
  absl::StatusOr<c10::OperatorHandle> op = ResolveOp("aten::relu", "");
  ASSERT_TRUE(op.ok());
  absl::StatusOr<DecodedCall> d = DecodeCall(ServerCall(call), op->schema(), {}, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->output_form.size(), 1u);
  const OutputForm& form = d->output_form[0];
  EXPECT_EQ(form.kind, OutputForm::Kind::kStatsOnly);
  EXPECT_EQ(form.dtype, wire::kFloat32);
  EXPECT_EQ(form.shape, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(form.stats.mean, 0.25);
  EXPECT_EQ(form.stats.l2_norm, 3.0);
  EXPECT_FALSE(d->inputs_contiguous) << "x.t() was strided in the training";
  const v1::ApiCall plain = testing::BuildCall("aten::relu", "", {x});
  d = DecodeCall(ServerCall(plain), op->schema(), {}, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->inputs_contiguous);
  EXPECT_TRUE(d->output_form[0].decoded());
}

}  // namespace
}  // namespace parity::server
