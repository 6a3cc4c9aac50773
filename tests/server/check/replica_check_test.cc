// Comparing a process group's replica reports (server/check/replica_check.h): the odd rank out
// named by the majority, both of two named, what counts as differing, the bounded wait, and
// every reporting rank told.
#include "server/check/replica_check.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/metrics.h"
#include "server/results/replica_writer.h"
#include "tests/testing/test_certs.h"

namespace parity::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ReplicaReport Report(int32_t rank, std::vector<int32_t> group,
                     std::vector<std::pair<std::string, uint64_t>> digests,
                     std::string algorithm = "crc32c") {
  ReplicaReport r;
  r.run_id = "run-1";
  r.rank = rank;
  r.group = std::move(group);
  r.step = 7;
  r.sequence = 0;
  r.kind = "parameters";
  r.op = "AdamW.step";
  r.algorithm = std::move(algorithm);
  for (auto& [name, digest] : digests) r.digests.push_back({name, digest, 4096});
  return r;
}

std::vector<const ReplicaReport*> Pointers(const std::vector<ReplicaReport>& reports) {
  std::vector<const ReplicaReport*> out;
  for (const ReplicaReport& r : reports) out.push_back(&r);
  return out;
}

TEST(CompareReplicasTest, ThreeAgainstOneNamesTheOddRankOut) {
  std::vector<ReplicaReport> reports;
  for (int32_t rank : {0, 1, 2, 3}) {
    reports.push_back(
        Report(rank, {0, 1, 2, 3}, {{"w1", 11}, {"w2", rank == 2 ? 99u : 22u}, {"w3", 33}}));
  }
  const ReplicaOutcome o = CompareReplicas(Pointers(reports));
  EXPECT_EQ(o.status, CheckStatus::kError);
  EXPECT_EQ(o.mismatch_count, 1u);
  ASSERT_EQ(o.mismatches.size(), 1u);
  EXPECT_EQ(o.mismatches[0].name, "w2");
  EXPECT_THAT(o.mismatches[0].agreeing, ElementsAre(0, 1, 3));
  EXPECT_THAT(o.mismatches[0].differing, ElementsAre(2));
  EXPECT_THAT(o.message, HasSubstr("w2: rank 2 differs from the majority (ranks 0, 1, 3)"));
  EXPECT_EQ(o.digests, 3u);
  EXPECT_TRUE(o.missing.empty());
}

TEST(CompareReplicasTest, TwoRanksThatDifferAreBothNamed) {
  const std::vector<ReplicaReport> reports = {Report(0, {0, 1}, {{"g", 5}}),
                                              Report(1, {0, 1}, {{"g", 6}})};
  const ReplicaOutcome o = CompareReplicas(Pointers(reports));
  EXPECT_EQ(o.status, CheckStatus::kError);
  ASSERT_EQ(o.mismatches.size(), 1u);
  EXPECT_TRUE(o.mismatches[0].agreeing.empty());
  EXPECT_THAT(o.mismatches[0].differing, ElementsAre(0, 1));
  EXPECT_THAT(o.message, HasSubstr("no majority"));
}

TEST(CompareReplicasTest, ASizeAnAlgorithmOrAMissingNameDiffersToo) {
  std::vector<ReplicaReport> reports;
  for (int32_t rank : {0, 1, 2}) reports.push_back(Report(rank, {0, 1, 2}, {{"a", 1}, {"b", 2}}));
  reports[1].digests[0].bytes = 2048;  // the same digest of another size
  reports[2].digests.pop_back();       // "b" not reported by rank 2
  ReplicaOutcome o = CompareReplicas(Pointers(reports));
  ASSERT_EQ(o.mismatch_count, 2u);
  EXPECT_THAT(o.mismatches[0].differing, ElementsAre(1));
  EXPECT_EQ(o.mismatches[1].name, "b");
  EXPECT_THAT(o.mismatches[1].differing, ElementsAre(2));
  reports = {Report(0, {0, 1, 2}, {{"a", 1}}), Report(1, {0, 1, 2}, {{"a", 1}}),
             Report(2, {0, 1, 2}, {{"a", 1}}, "poly64")};
  o = CompareReplicas(Pointers(reports));
  ASSERT_EQ(o.mismatch_count, 1u) << "a digest made another way is not the same digest";
  EXPECT_THAT(o.mismatches[0].differing, ElementsAre(2));
}

TEST(CompareReplicasTest, AgreementPassesAndALoneReportIsSkippedWithTheOthersMissing) {
  std::vector<ReplicaReport> reports = {Report(0, {0, 1, 2}, {{"a", 1}}),
                                        Report(2, {0, 1, 2}, {{"a", 1}})};
  ReplicaOutcome o = CompareReplicas(Pointers(reports));
  EXPECT_EQ(o.status, CheckStatus::kPass);
  EXPECT_THAT(o.reported, ElementsAre(0, 2));
  EXPECT_THAT(o.missing, ElementsAre(1));
  EXPECT_THAT(o.message, HasSubstr("rank 1 did not report within the wait (not blamed)"));
  reports.pop_back();
  o = CompareReplicas(Pointers(reports));
  EXPECT_EQ(o.status, CheckStatus::kSkip);
  EXPECT_THAT(o.missing, ElementsAre(1, 2));
}

// A mailbox that records what it was given, and lets a test wait for it.
class RecordingMailbox : public ReplicaMailbox {
 public:
  void Deliver(const ReplicaOutcome& outcome) override {
    absl::MutexLock lock(&mu_);
    got_.push_back(outcome);
  }
  ReplicaOutcome WaitForOne() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::vector<ReplicaOutcome>* g) { return !g->empty(); }, &got_));
    return got_.front();
  }
  std::size_t count() {
    absl::MutexLock lock(&mu_);
    return got_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<ReplicaOutcome> got_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(ReplicaCheckerTest, TheLastRankOfAGroupCompletesItAndEveryRankIsTold) {
  const std::string dir = testing::MakeTempDir("parity_replicas_");
  auto writer = ReplicaWriter::Create(dir, "20261129000000");
  ASSERT_TRUE(writer.ok()) << writer.status();
  prometheus::Registry registry;
  ServerMetrics metrics(registry);
  ReplicaOptions options;
  options.wait_ms = 3600 * 1000;  // only the group's completion concludes it here
  ReplicaChecker checker(options, writer->get(), &metrics);
  std::vector<std::shared_ptr<RecordingMailbox>> boxes;
  for (int32_t rank : {0, 1, 2}) {
    boxes.push_back(std::make_shared<RecordingMailbox>());
    checker.Report(Report(rank, {0, 1, 2}, {{"layers.0.w", rank == 1 ? 8u : 7u}}), boxes.back());
    EXPECT_EQ(checker.waiting(), rank < 2 ? 1u : 0u);
  }
  for (auto& box : boxes) {
    const ReplicaOutcome o = box->WaitForOne();  // on the checker's thread
    ASSERT_EQ(box->count(), 1u) << "each reporting rank is told, once";
    EXPECT_EQ(o.status, CheckStatus::kError);
    EXPECT_THAT(o.mismatches[0].differing, ElementsAre(1));
  }
  EXPECT_EQ(checker.waiting_bytes(), 0u) << "a concluded group holds nothing";
  const std::vector<std::string> paths = (*writer)->Paths();
  ASSERT_EQ(paths.size(), 2u);
  const std::string csv = ReadAll(paths[0]);
  EXPECT_THAT(csv, HasSubstr("Run,Step,Kind,Operation,Sequence,Group,Status"));
  EXPECT_THAT(csv, HasSubstr("run-1,7,parameters,AdamW.step,0,0 1 2,error,1,1,layers.0.w,0 2,1,"));
  EXPECT_THAT(ReadAll(paths[1]), HasSubstr("\"differing\":[1]"));
}

TEST(ReplicaCheckerTest, AGroupMissingARankIsConcludedAfterTheWaitWithoutBlamingIt) {
  ReplicaOptions options;
  options.wait_ms = 1;
  ReplicaChecker checker(options, nullptr, nullptr);
  auto box = std::make_shared<RecordingMailbox>();
  checker.Report(Report(0, {0, 1, 2}, {{"a", 1}}), box);
  checker.Report(Report(1, {0, 1, 2}, {{"a", 1}}), nullptr);
  const ReplicaOutcome o = box->WaitForOne();  // the timer concludes it
  EXPECT_EQ(o.status, CheckStatus::kPass);
  EXPECT_THAT(o.missing, ElementsAre(2));
  EXPECT_EQ(checker.waiting(), 0u);
}

TEST(ReplicaCheckerTest, ASecondReportOfARankIsIgnoredAndTheWaitingGroupsAreBounded) {
  ReplicaOptions options;
  options.wait_ms = 3600 * 1000;
  options.max_waiting_groups = 2;
  ReplicaChecker checker(options, nullptr, nullptr);
  auto first = std::make_shared<RecordingMailbox>();
  checker.Report(Report(0, {0, 1}, {{"a", 1}}), first);
  checker.Report(Report(0, {0, 1}, {{"a", 2}}), first);  // the same key: dropped
  EXPECT_EQ(checker.waiting(), 1u);
  for (uint64_t sequence : {1, 2}) {
    ReplicaReport r = Report(0, {0, 1}, {{"a", 1}});
    r.sequence = sequence;
    checker.Report(std::move(r), nullptr);
  }
  EXPECT_EQ(checker.waiting(), 2u) << "the oldest was concluded to stay within the bound";
  const ReplicaOutcome o = first->WaitForOne();
  EXPECT_EQ(o.status, CheckStatus::kSkip);
  EXPECT_THAT(o.missing, ElementsAre(1));
  checker.CompareWaiting();
  EXPECT_EQ(checker.waiting(), 0u);
}

// The comparison, and the write of its rows, run on the checker's thread, not on the thread
// that brought the group's last report (a stream's reading thread, which must keep reading).
TEST(ReplicaCheckerTest, TheComparisonRunsOffTheReportingThread) {
  class ThreadMailbox : public RecordingMailbox {
   public:
    void Deliver(const ReplicaOutcome& outcome) override {
      thread = std::this_thread::get_id();
      RecordingMailbox::Deliver(outcome);
    }
    std::atomic<std::thread::id> thread{};
  };
  ReplicaOptions options;
  options.wait_ms = 3600 * 1000;
  ReplicaChecker checker(options, nullptr, nullptr);
  auto box = std::make_shared<ThreadMailbox>();
  checker.Report(Report(0, {0, 1}, {{"a", 1}}), nullptr);
  checker.Report(Report(1, {0, 1}, {{"a", 1}}), box);
  EXPECT_EQ(box->WaitForOne().status, CheckStatus::kPass);
  EXPECT_NE(box->thread.load(), std::this_thread::get_id());
}

// A worst-case client: reports of 1,000 digests with 1 KiB names (about 1 MiB each), each group
// waiting for a rank that never reports, under a 4 MiB bound. The reports held never pass the
// bound by more than the report just taken; the groups cut short are compared with what they
// have (SKIP, the silent rank missing), and nothing is lost: every mailbox hears once.
TEST(ReplicaCheckerTest, TheBytesOfReportsHeldAreBoundedWhateverTheReportsSize) {
  ReplicaOptions options;
  options.wait_ms = 3600 * 1000;
  options.max_waiting_bytes = 4 << 20;
  ReplicaChecker checker(options, nullptr, nullptr);
  const std::string long_name(1024, 'n');
  std::vector<std::shared_ptr<RecordingMailbox>> boxes;
  uint64_t largest = 0;
  for (uint64_t sequence = 0; sequence < 40; ++sequence) {
    ReplicaReport r = Report(0, {0, 1}, {});
    r.sequence = sequence;
    for (int i = 0; i < 1000; ++i) r.digests.push_back({long_name + std::to_string(i), 1, 4});
    largest = std::max(largest, ReplicaChecker::BytesOf(r));
    boxes.push_back(std::make_shared<RecordingMailbox>());
    checker.Report(std::move(r), boxes.back());
    EXPECT_LE(checker.waiting_bytes(), options.max_waiting_bytes + largest) << sequence;
  }
  EXPECT_GT(largest, 1000u * 1024) << "the estimate counts the names";
  EXPECT_LT(checker.waiting(), 5u) << "about 4 MiB of 1 MiB reports";
  checker.CompareWaiting();
  for (auto& box : boxes) {
    const ReplicaOutcome o = box->WaitForOne();
    EXPECT_EQ(o.status, CheckStatus::kSkip);
    EXPECT_THAT(o.missing, ElementsAre(1));
  }
  EXPECT_EQ(checker.waiting_bytes(), 0u);
}

// A result row that cannot be written (its folder replaced by a file) is counted lost, as a
// call's.
TEST(ReplicaCheckerTest, ARowThatCannotBeWrittenIsCountedLost) {
  const std::string dir = testing::MakeTempDir("parity_replicas_lost_") + "/out";
  auto writer = ReplicaWriter::Create(dir, "20261129000000");
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::filesystem::remove_all(dir);
  std::ofstream(dir) << "not a folder";
  prometheus::Registry registry;
  ServerMetrics metrics(registry);
  ReplicaOptions options;
  ReplicaChecker checker(options, writer->get(), &metrics);
  auto box = std::make_shared<RecordingMailbox>();
  checker.Report(Report(0, {0, 1}, {{"a", 1}}), nullptr);
  checker.Report(Report(1, {0, 1}, {{"a", 1}}), box);
  EXPECT_EQ(box->WaitForOne().status, CheckStatus::kPass) << "the ranks are told all the same";
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(text, HasSubstr("parity_server_result_rows_lost_total{reason=\"not_writable\"} 1"));
}

}  // namespace
}  // namespace parity::server
