// ReplicaReport off the wire, with its rules (parity.proto), and ReplicaVerdict onto it.
#include "server/call/replica_wire.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ReplicaReport Valid() {
  v1::ReplicaReport r;
  for (int32_t g : {0, 1, 2, 3}) r.add_group(g);
  r.set_step(3);
  r.set_sequence(2);
  r.set_kind("collective");
  r.set_op("all_gather");
  r.set_algorithm("crc32c");
  v1::ReplicaDigest* d = r.add_digests();
  d->set_name("output[1]");
  d->set_digest(0xfeedu);
  d->set_bytes(64);
  return r;
}

TEST(ReplicaWireTest, AValidReportKeepsEveryFieldWithItsStreamsRunAndRank) {
  absl::StatusOr<ReplicaReport> r = ReplicaReportFromWire(Valid(), "run-9", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->run_id, "run-9");
  EXPECT_EQ(r->rank, 2);
  EXPECT_THAT(r->group, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->sequence, 2u);
  EXPECT_EQ(r->kind, "collective");
  EXPECT_EQ(r->op, "all_gather");
  ASSERT_EQ(r->digests.size(), 1u);
  EXPECT_EQ(r->digests[0].name, "output[1]");
  EXPECT_EQ(r->digests[0].digest, 0xfeedu);
  EXPECT_EQ(r->digests[0].bytes, 64u);
}

TEST(ReplicaWireTest, EachBrokenRuleIsRefusedNamingTheField) {
  struct Case {
    std::function<void(v1::ReplicaReport&)> edit;
    absl::StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {[](v1::ReplicaReport& r) { r.clear_group(); }, absl::StatusCode::kInvalidArgument,
       "group is empty"},
      {[](v1::ReplicaReport& r) { r.set_group(1, 0); }, absl::StatusCode::kInvalidArgument,
       "ascending"},
      {[](v1::ReplicaReport& r) {
         r.set_group(2, 3);
         r.set_group(3, 5);
       },
       absl::StatusCode::kInvalidArgument, "does not hold this stream's rank 2"},
      {[](v1::ReplicaReport& r) { r.set_kind("weights"); }, absl::StatusCode::kInvalidArgument,
       "ReplicaReport.kind"},
      {[](v1::ReplicaReport& r) { r.set_algorithm("md5"); }, absl::StatusCode::kInvalidArgument,
       "ReplicaReport.algorithm"},
      {[](v1::ReplicaReport& r) { r.set_op(""); }, absl::StatusCode::kInvalidArgument,
       "ReplicaReport.op"},
      {[](v1::ReplicaReport& r) { r.mutable_digests(0)->set_name("a\nb"); },
       absl::StatusCode::kInvalidArgument, "ReplicaDigest.name"},
      {[](v1::ReplicaReport& r) { r.set_step(-1); }, absl::StatusCode::kInvalidArgument,
       "step is negative"},
      {[](v1::ReplicaReport& r) {
         for (std::size_t i = 0; i < common::kMaxReplicaDigests; ++i) r.add_digests();
       },
       absl::StatusCode::kResourceExhausted, "at most 65536"},
  };
  for (const Case& c : cases) {
    v1::ReplicaReport report = Valid();
    c.edit(report);
    absl::StatusOr<ReplicaReport> r = ReplicaReportFromWire(report, "run", 2);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.says));
  }
}

TEST(ReplicaWireTest, AnOutcomeGoesOnTheWireWhole) {
  ReplicaOutcome o;
  o.group = {0, 1, 2};
  o.step = 4;
  o.sequence = 1;
  o.kind = "gradients";
  o.op = "AdamW.step";
  o.status = CheckStatus::kError;
  o.mismatches.push_back({"fc.weight.grad", {0, 2}, {1}});
  o.mismatch_count = 3;
  o.missing = {};
  o.message = "silent data corruption";
  const v1::ReplicaVerdict v = ReplicaVerdictToWire(o);
  EXPECT_THAT(v.group(), ElementsAre(0, 1, 2));
  EXPECT_EQ(v.status(), v1::VERDICT_STATUS_ERROR);
  ASSERT_EQ(v.mismatches_size(), 1);
  EXPECT_EQ(v.mismatches(0).name(), "fc.weight.grad");
  EXPECT_THAT(v.mismatches(0).agreeing(), ElementsAre(0, 2));
  EXPECT_THAT(v.mismatches(0).differing(), ElementsAre(1));
  EXPECT_EQ(v.mismatch_count(), 3u);
  EXPECT_EQ(v.kind(), "gradients");
  EXPECT_EQ(v.message(), "silent data corruption");
}

}  // namespace
}  // namespace parity::server
