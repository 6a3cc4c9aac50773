// Result files: msprobe's exact headers, names and cell formats, one details row per output, one
// result row per API and step, resume on restart.
#include "server/results/result_writer.h"
#include "parity/v1/parity.pb.h"

#include <limits>

#include <sys/resource.h>

#include <algorithm>
#include <csignal>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/call/verdict_encoder.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace parity::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Rows(const std::string& path) {
  std::vector<std::string> rows = absl::StrSplit(testing::ReadAll(path), "\r\n", absl::SkipEmpty());
  return rows;
}

// A checked call with one benchmark-standard output that failed on RMSE.
CallOutcome SampleCheck(CheckStatus status) {
  CallOutcome c;
  c.status = status;
  c.message = status == CheckStatus::kError ? "output 0: rmse (benchmark)" : "";
  OutputOutcome out;
  out.index = 0;
  out.dtype = wire::kFloat16;
  out.bench_dtype = wire::kFloat16;
  out.reference_dtype = wire::kFloat64;  // the golden's: what the metrics compare against
  out.shape = {2, 3};
  out.judged = true;
  OutputJudgement& j = out.judgement;
  j.status = status;
  j.standard = Standard::kBenchmark;
  j.failed_metric = Metric::kRmse;
  j.message = "line one\nline, two";
  PairMetrics& m = j.device.emplace();
  m.cosine = 0.5;
  m.max_abs_error = 1.0 / 3;
  m.rmse = std::numeric_limits<double>::infinity();
  j.two_way_status = CheckStatus::kWarning;
  j.ratios.push_back({Metric::kRmse, Ratio{3.0, false}});
  j.ratios.push_back({Metric::kErrorBalance, Ratio{4.0, false}});
  c.outputs.push_back(out);
  return c;
}

v1::ApiCall SampleCall(v1::Phase phase) {
  v1::ApiCall c;
  c.set_op_name(phase == v1::PHASE_BACKWARD ? "aten::gelu_backward" : "aten::gelu");
  c.set_forward_op_name("aten::gelu");
  c.set_call_index(4);
  c.set_phase(phase);
  c.set_module_path("net.act");
  return c;
}

absl::Status Write(ResultWriter& w, const CallOrigin& origin, const v1::ApiCall& call,
                   const CallOutcome& check) {
  const ServerCall server_call(call);
  return w.Write(origin, server_call, check);
}

TEST(ResultWriterTest, WritesMsprobeHeadersAndCells) {
  const std::string dir = testing::MakeTempDir("parity_rw_");
  auto w = ResultWriter::Create(dir + "/out", StandardsTable::Default(), "20261122101010");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(Write(**w, {2, "run", "h", ""}, SampleCall(v1::PHASE_FORWARD),
                    SampleCheck(CheckStatus::kError))
                  .ok());
  ASSERT_TRUE(Write(**w, {2, "run", "h", ""}, SampleCall(v1::PHASE_BACKWARD),
                    SampleCheck(CheckStatus::kPass))
                  .ok());
  const std::string base = dir + "/out/";
  // The result rows wait for the step's backward calls; the stream's end writes them.
  EXPECT_EQ(Rows(base + "accuracy_checking_result_20261122101010_rank2.csv").size(), 1u);
  ASSERT_TRUE((*w)->EndOfStream(2).ok());
  // One row per API: msprobe's name, its forward and its backward status.
  auto rows = Rows(base + "accuracy_checking_result_20261122101010_rank2.csv");
  EXPECT_THAT(rows, ElementsAre("\xEF\xBB\xBF"
                                "API name,Forward Test Success,Backward Test "
                                "Success,Message",
                                "Functional.gelu.4,error,pass,output 0: rmse (benchmark)"));
  rows = Rows(base + "api_precision_compare_result_20261122101010_rank2.csv");
  EXPECT_THAT(rows,
              ElementsAre(::testing::_, "Functional.gelu.4,error,pass,output 0: rmse (benchmark)"));
  rows = Rows(base + "accuracy_checking_details_20261122101010_rank2.csv");
  ASSERT_EQ(rows.size(), 3u);
  std::vector<std::string> header = absl::StrSplit(rows[0], ',');
  EXPECT_EQ(header.size(), 23u);
  EXPECT_EQ(header[4], "余弦相似度");
  EXPECT_EQ(rows[1],
            "Functional.gelu.4.forward.output.0,torch.float64,torch.float16,\"(2, 3)\","
            "0.50000000000000,0.33333333333333,1.00000000000000,1.00000000000000,"
            "1.00000000000000,0.00000000000000,0.00000000000000,inf,0.00000000000000,"
            "0.00000000000000,0.00000000000000,0.00000000000000,0.00000000000000,"
            "0.00000000000000,0.00000000000000,0.00000000000000,0.00000000000000,error,"
            "\"line one\nline, two\"");
  EXPECT_THAT(rows[2], ::testing::StartsWith("Functional.gelu.4.backward.output.0,"));
  rows = Rows(base + "api_precision_compare_details_20261122101010_rank2.csv");
  header = absl::StrSplit(rows[0], ',');
  EXPECT_EQ(header.size(), 28u);
  EXPECT_EQ(header[26], "比对算法");
  // RMSE ratio 3 > 2 decides (error); error balance only warns; the message is quoted.
  EXPECT_THAT(rows[1], ::testing::StartsWith("Functional.gelu.4.forward.output.0, , ,"
                                             "3.00000000000000,error, , , , ,"
                                             "4.00000000000000,Warning,"));
  EXPECT_THAT(rows[1], HasSubstr(",error,标杆比对法,\"line one\nline, two\""));
  // The JSON-lines record keeps what the CSVs cannot.
  const std::string jsonl = testing::ReadAll(base + "parity_results_20261122101010_rank2.jsonl");
  EXPECT_THAT(jsonl, HasSubstr("\"module_path\":\"net.act\""));
  EXPECT_THAT(jsonl, HasSubstr("\"api\":\"aten::gelu.4\","));
  EXPECT_THAT(jsonl, HasSubstr("\"csv_api\":\"Functional.gelu.4\","));
  EXPECT_THAT(jsonl, HasSubstr("\"rmse\":\"inf\""));
  EXPECT_THAT(jsonl, HasSubstr("\"rtol\":0.0009765625"));
  // The legacy two-way chain's status (Warning here) is kept there, not in the CSVs.
  EXPECT_THAT(jsonl, HasSubstr("\"two_way_status\":\"Warning\""));
  EXPECT_EQ((*w)->Paths().size(), 5u);
}

// A write that fails part way (a full disk; here a file size limit, which fails the same way:
// a short write, then an error) leaves no partial row: the file is truncated back, the error
// says why (RESOURCE_EXHAUSTED: the server counts it as disk_full), and once there is room the
// next row starts on a line of its own. Before, the cut row stayed and the next was glued to it.
TEST(ResultWriterTest, AFailedWriteLeavesNoPartialRow) {
  const std::string dir = testing::MakeTempDir("parity_rw_full_");
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20261126000000");
  ASSERT_TRUE(w.ok()) << w.status();
  const CallOrigin origin{0, "run", "h", ""};
  ASSERT_TRUE(
      Write(**w, origin, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kError)).ok());
  std::uintmax_t largest = 0;
  for (const std::string& p : (*w)->Paths()) {
    largest = std::max(largest, std::filesystem::file_size(p));
  }
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  struct rlimit limited = saved;
  limited.rlim_cur = static_cast<rlim_t>(largest + 40);  // room for 40 bytes of the next row
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  const absl::Status failed =
      Write(**w, origin, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("the row was not kept"));
  ASSERT_TRUE(
      Write(**w, origin, SampleCall(v1::PHASE_BACKWARD), SampleCheck(CheckStatus::kPass)).ok());
  for (const std::string& p : (*w)->Paths()) {
    SCOPED_TRACE(p);
    const std::string text = testing::ReadAll(p);
    const bool jsonl = absl::EndsWith(p, ".jsonl");
    ASSERT_TRUE(absl::EndsWith(text, jsonl ? "\n" : "\r\n")) << "a line left unterminated";
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      // One call's row a line: never a row glued onto the cut end of another.
      if (jsonl) {
        EXPECT_TRUE(absl::StartsWith(line, "{") && absl::EndsWith(line, "}")) << line;
        const std::vector<absl::string_view> parts = absl::StrSplit(line, "\"api\":");
        EXPECT_EQ(parts.size(), 2u) << line;
      } else {
        const std::vector<absl::string_view> rows = absl::StrSplit(line, "Functional.gelu.4");
        EXPECT_LE(rows.size(), 2u) << line;
      }
    }
  }
  // The summary files: a header and the row of the calls that were written (the failed one is
  // not in it).
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  EXPECT_THAT(Rows(dir + "/api_precision_compare_result_20261126000000_rank0.csv"),
              ElementsAre(::testing::_, "Functional.gelu.4,error,pass,output 0: rmse (benchmark)"));
}

TEST(ResultWriterTest, RestartAppendsToTheNewestFileSetOfTheRank) {
  const std::string dir = testing::MakeTempDir("parity_rw_");
  {
    auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260101000000");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(
        Write(**w, {0, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
            .ok());
  }
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260202000000");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(
      Write(**w, {0, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
          .ok());
  ASSERT_TRUE(
      Write(**w, {1, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
          .ok());
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  ASSERT_TRUE((*w)->EndOfStream(1).ok());
  // Rank 0 resumed its file (one header, two rows); rank 1 had none, so it starts a new set.
  EXPECT_EQ(Rows(dir + "/accuracy_checking_result_20260101000000_rank0.csv").size(), 3u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/accuracy_checking_result_20260202000000_rank0.csv"));
  EXPECT_EQ(Rows(dir + "/accuracy_checking_result_20260202000000_rank1.csv").size(), 2u);
}

// A result file deleted, or the whole folder removed, or a file replaced (logrotate's copy),
// while the server writes: noticed before the next row, reopened as a new file with its header,
// and the calls whose rows went to the vanished file reported lost (issue 65: 8,507 calls
// checked after an unlink left no record and counted nothing).
TEST(ResultWriterTest, AFileThatVanishesIsReopenedAndTheLossReported) {
  namespace fs = std::filesystem;
  const std::string dir = testing::MakeTempDir("parity_rw_") + "/out";
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260303000000");
  ASSERT_TRUE(w.ok());
  std::vector<uint64_t> reported;
  (*w)->OnVanished([&reported](uint64_t calls) { reported.push_back(calls); });
  const CallOrigin origin{0, "", "", ""};
  auto write = [&](int64_t step) {
    v1::ApiCall call = SampleCall(v1::PHASE_FORWARD);
    call.set_step(step);
    return Write(**w, origin, call, SampleCheck(CheckStatus::kPass));
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(write(0).ok());
  const std::string jsonl = dir + "/parity_results_20260303000000_rank0.jsonl";
  const std::string details = dir + "/accuracy_checking_details_20260303000000_rank0.csv";
  ASSERT_EQ(Rows(jsonl).size(), 1u);  // one line: the rows are joined by "\n" alone
  fs::remove(jsonl);
  ASSERT_TRUE(write(0).ok());
  EXPECT_THAT(reported, ElementsAre(3u)) << "the three calls in the deleted file";
  EXPECT_EQ(
      std::vector<std::string>(absl::StrSplit(testing::ReadAll(jsonl), "\n", absl::SkipEmpty()))
          .size(),
      1u)
      << "the new file holds the call written after the unlink";
  // The whole folder removed: recreated, every file reopened, each CSV with its header.
  fs::remove_all(dir);
  ASSERT_TRUE(write(0).ok());
  EXPECT_THAT(reported, ElementsAre(3u, 4u));
  std::vector<std::string> rows = Rows(details);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(rows[0], "\xEF\xBB\xBF")) << "a header again";
  // Replaced by another file at the same path (moved away, a new one put there): the writer's
  // inode is no longer the path's.
  fs::rename(details, details + ".1");
  std::ofstream(details) << "someone else's file\n";
  ASSERT_TRUE(write(0).ok());
  EXPECT_EQ(reported.size(), 3u);
  EXPECT_THAT(testing::ReadAll(details), HasSubstr("someone else's file"))
      << "appended after what is there, never truncated";
  // Nothing vanished: nothing reported.
  ASSERT_TRUE(write(1).ok());
  EXPECT_EQ(reported.size(), 3u);
}

// A step that never ends (no step() in the training, an inference run; issue 65: 2 x 20,000
// calls in step 0 grew the server by 80-89 MiB): every call a new API's row, the rows waiting stay
// within the bound, the oldest written as they stand, every call's status in some row.
TEST(ResultWriterTest, AStepThatNeverEndsKeepsABoundedNumberOfRowsWaiting) {
  const std::string dir = testing::MakeTempDir("parity_rw_");
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260404000000");
  ASSERT_TRUE(w.ok());
  const CallOrigin origin{0, "", "", ""};
  const std::size_t calls = 60000;  // the run, past the bound several times over
  static_assert(60000 > 3 * kMaxPendingResultRows);
  for (std::size_t i = 0; i < calls; ++i) {
    v1::ApiCall call = SampleCall(v1::PHASE_FORWARD);
    call.set_call_index(i);  // a new API name each: Functional.gelu.{i}
    ASSERT_TRUE(Write(**w, origin, call, SampleCheck(CheckStatus::kPass)).ok());
    ASSERT_LE((*w)->PendingRowsForTesting(0), kMaxPendingResultRows);
  }
  const std::string result = dir + "/accuracy_checking_result_20260404000000_rank0.csv";
  EXPECT_GE(Rows(result).size(), 1 + calls - kMaxPendingResultRows) << "written as they stand";
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  EXPECT_EQ(Rows(result).size(), 1 + calls) << "each call's row once, the header first";
  EXPECT_EQ((*w)->PendingRowsForTesting(0), 0u);
}

TEST(ResultWriterTest, RestartRemovesALineCutByACrashAndKeepsTheWholeOnes) {
  const std::string dir = testing::MakeTempDir("parity_rw_");
  {
    auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260101000000");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(
        Write(**w, {0, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
            .ok());
  }
  // A server killed mid-write: the JSON line and the summary row each lose their tail.
  const std::string jsonl = dir + "/parity_results_20260101000000_rank0.jsonl";
  const std::string summary = dir + "/accuracy_checking_result_20260101000000_rank0.csv";
  const std::string whole_jsonl = testing::ReadAll(jsonl);
  const std::string whole_summary = testing::ReadAll(summary);
  {
    std::ofstream(jsonl, std::ios::app) << "{\"rank\":0,\"op_name\":\"aten::ge";
    std::ofstream(summary, std::ios::app) << "aten::gelu.2.forward,pass,";
  }
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260202000000");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(
      Write(**w, {0, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
          .ok());
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  // The cut tails are gone and the new row follows the old whole ones.
  const std::string after = testing::ReadAll(jsonl);
  ASSERT_EQ(after.substr(0, whole_jsonl.size()), whole_jsonl);
  EXPECT_THAT(after, ::testing::Not(HasSubstr("aten::ge\"")));
  EXPECT_THAT(after, ::testing::Not(HasSubstr("aten::ge{")));
  std::vector<std::string> lines = absl::StrSplit(after, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
  const std::vector<std::string> rows = Rows(summary);
  ASSERT_EQ(rows.size(), 3u);  // header + the old row + the new one
  EXPECT_EQ(testing::ReadAll(summary).substr(0, whole_summary.size()), whole_summary);
  EXPECT_EQ(rows[1], rows[2]);
}

TEST(ResultWriterTest, AFileCutInsideItsHeaderStartsOverWithAHeader) {
  const std::string dir = testing::MakeTempDir("parity_rw_");
  const std::string summary = dir + "/accuracy_checking_result_20260101000000_rank0.csv";
  std::ofstream(summary) << "\xEF\xBB\xBF"
                            "API name,Forward Test Suc";
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20260202000000");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(
      Write(**w, {0, "", "", ""}, SampleCall(v1::PHASE_FORWARD), SampleCheck(CheckStatus::kPass))
          .ok());
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  const std::vector<std::string> rows = Rows(summary);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].rfind("\xEF\xBB\xBF", 0), 0u);
  EXPECT_THAT(rows[0], ::testing::Not(HasSubstr("Forward Test SucAPI")));
}

// msprobe's result file has one row per API: its forward status and the aggregate of its
// backward calls' (linear's backward runs mm, mm and sum: three calls, one row). A step's rows
// are written once the step after next begins (a straggler of the step, checked out of order,
// still finds its row), and the backward calls' outputs are numbered on, so that every details
// row of a step has its own name.
TEST(ResultWriterTest, OneResultRowPerApiWithItsForwardAndBackwardStatus) {
  const std::string dir = testing::MakeTempDir("parity_rw_api_");
  auto w = ResultWriter::Create(dir, StandardsTable::Default(), "20261126000000");
  ASSERT_TRUE(w.ok()) << w.status();
  const CallOrigin origin{0, "run", "h", ""};
  auto call = [](const std::string& op, v1::Phase phase, int64_t step, uint64_t index) {
    v1::ApiCall c;
    c.set_op_name(op);
    c.set_phase(phase);
    c.set_step(step);
    c.set_call_index(index);
    if (phase == v1::PHASE_BACKWARD) c.set_forward_op_name("aten::linear");
    return c;
  };
  auto write = [&](const v1::ApiCall& c, CheckStatus s) {
    ASSERT_TRUE(Write(**w, origin, c, SampleCheck(s)).ok());
  };
  const std::string result = dir + "/accuracy_checking_result_20261126000000_rank0.csv";
  const std::string details = dir + "/accuracy_checking_details_20261126000000_rank0.csv";
  write(call("aten::linear", v1::PHASE_FORWARD, 0, 0), CheckStatus::kPass);
  write(call("aten::gelu", v1::PHASE_FORWARD, 0, 0), CheckStatus::kPass);
  write(call("aten::linear", v1::PHASE_FORWARD, 0, 1), CheckStatus::kPass);
  write(call("aten::mm", v1::PHASE_BACKWARD, 0, 1), CheckStatus::kPass);
  write(call("aten::mm", v1::PHASE_BACKWARD, 0, 1), CheckStatus::kError);
  write(call("aten::sum", v1::PHASE_BACKWARD, 0, 1), CheckStatus::kPass);
  v1::ApiCall gelu_backward = call("aten::gelu_backward", v1::PHASE_BACKWARD, 0, 0);
  gelu_backward.set_forward_op_name("aten::gelu");
  write(gelu_backward, CheckStatus::kPass);
  gelu_backward.set_op_name("my::unknown_op");
  write(gelu_backward, CheckStatus::kSkip);  // not checked
  write(call("aten::linear", v1::PHASE_FORWARD, 1, 0), CheckStatus::kPass);
  EXPECT_EQ(Rows(result).size(), 1u) << "step 0's rows went before step 2 began";
  write(call("aten::mm", v1::PHASE_BACKWARD, 0, 0), CheckStatus::kSkip);  // a straggler
  write(call("aten::linear", v1::PHASE_FORWARD, 2, 0), CheckStatus::kWarning);
  EXPECT_THAT(Rows(result),
              ElementsAre(::testing::_, "Functional.linear.0,pass,SKIP, ",
                          // one backward call checked, one not: SKIP, never pass
                          ::testing::StartsWith("Functional.gelu.0,pass,SKIP,"),
                          "Functional.linear.1,pass,error,output 0: rmse (benchmark)"));
  ASSERT_TRUE((*w)->EndOfStream(0).ok());
  EXPECT_THAT(Rows(result),
              ElementsAre(::testing::_, ::testing::_, ::testing::_, ::testing::_,
                          "Functional.linear.0,pass, , ", "Functional.linear.0,Warning, , "));
  std::vector<std::string> names;
  for (const std::string& row : Rows(details)) names.push_back(row.substr(0, row.find(',')));
  EXPECT_THAT(
      names,
      ElementsAre("\xEF\xBB\xBF"
                  "API Name",
                  "Functional.linear.0.forward.output.0", "Functional.gelu.0.forward.output.0",
                  "Functional.linear.1.forward.output.0", "Functional.linear.1.backward.output.0",
                  "Functional.linear.1.backward.output.1", "Functional.linear.1.backward.output.2",
                  "Functional.gelu.0.backward.output.0", "Functional.gelu.0.backward.output.1",
                  "Functional.linear.0.forward.output.0", "Functional.linear.0.backward.output.0",
                  "Functional.linear.0.forward.output.0"));
}

TEST(ResultWriterTest, UnwritableDirectoryFailsAtCreate) {
  auto w = ResultWriter::Create("/proc/parity-cannot-write-here", StandardsTable::Default());
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("/proc/parity-cannot-write-here"));
}

TEST(CsvTest, FormatsLikePythonsCsvWriter) {
  EXPECT_EQ(CsvDouble(0.1), "0.10000000000000");
  EXPECT_EQ(CsvDouble(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(CsvDouble(std::nan("")), "nan");
  EXPECT_EQ(CsvRow({"a", "b,c", "say \"hi\"", " "}), "a,\"b,c\",\"say \"\"hi\"\"\", \r\n");
  EXPECT_EQ(ShapeTuple({}), "()");
  EXPECT_EQ(ShapeTuple({0}), "(0,)");
  EXPECT_EQ(ShapeTuple({0, 5}), "(0, 5)");
}

}  // namespace
}  // namespace parity::server
