#include "server/call/replica_wire.h"

#include "absl/strings/str_cat.h"
#include "common/base/text.h"
#include "server/call/verdict_encoder.h"

namespace parity::server {

absl::StatusOr<ReplicaReport> ReplicaReportFromWire(const v1::ReplicaReport& in,
                                                    const std::string& run_id, int32_t rank) {
  if (in.group_size() == 0) return absl::InvalidArgumentError("ReplicaReport.group is empty");
  if (static_cast<std::size_t>(in.group_size()) > kMaxReplicaGroup) {
    return absl::ResourceExhaustedError(absl::StrCat("ReplicaReport.group: ", in.group_size(),
                                                     " ranks, at most ", kMaxReplicaGroup));
  }
  if (static_cast<std::size_t>(in.digests_size()) > kMaxReplicaDigests) {
    return absl::ResourceExhaustedError(absl::StrCat("ReplicaReport.digests: ", in.digests_size(),
                                                     ", at most ", kMaxReplicaDigests));
  }
  bool member = false;
  for (int i = 0; i < in.group_size(); ++i) {
    if (in.group(i) < 0 || (i > 0 && in.group(i) <= in.group(i - 1))) {
      return absl::InvalidArgumentError(
          "ReplicaReport.group: global ranks, not negative, each once, ascending");
    }
    member |= in.group(i) == rank;
  }
  if (!member) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplicaReport.group does not hold this stream's rank ", rank));
  }
  if (in.kind() != "gradients" && in.kind() != "parameters" && in.kind() != "collective") {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplicaReport.kind: \"", common::EscapeControl(in.kind().substr(0, 64)),
                     "\" is none of gradients, parameters, collective"));
  }
  if (in.algorithm() != "crc32c" && in.algorithm() != "poly64") {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplicaReport.algorithm: \"", common::EscapeControl(in.algorithm().substr(0, 64)),
        "\" is neither crc32c nor poly64"));
  }
  if (in.op().empty() || in.op().size() > kMaxReplicaNameBytes ||
      common::EscapeControl(in.op()) != in.op()) {
    return absl::InvalidArgumentError(absl::StrCat("ReplicaReport.op: 1 to ", kMaxReplicaNameBytes,
                                                   " bytes without control characters"));
  }
  if (in.step() < 0) return absl::InvalidArgumentError("ReplicaReport.step is negative");
  ReplicaReport r;
  r.run_id = run_id;
  r.rank = rank;
  r.group.assign(in.group().begin(), in.group().end());
  r.step = in.step();
  r.sequence = in.sequence();
  r.kind = in.kind();
  r.op = in.op();
  r.algorithm = in.algorithm();
  r.digests.reserve(in.digests_size());
  for (const v1::ReplicaDigest& d : in.digests()) {
    if (d.name().size() > kMaxReplicaNameBytes || common::EscapeControl(d.name()) != d.name()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReplicaDigest.name: at most ", kMaxReplicaNameBytes, " bytes, no control characters"));
    }
    r.digests.push_back({d.name(), d.digest(), d.bytes()});
  }
  return r;
}

v1::ReplicaVerdict ReplicaVerdictToWire(const ReplicaOutcome& o) {
  v1::ReplicaVerdict v;
  for (int32_t g : o.group) v.add_group(g);
  v.set_step(o.step);
  v.set_sequence(o.sequence);
  v.set_kind(o.kind);
  v.set_op(o.op);
  v.set_status(ToProto(o.status));
  for (const ReplicaOutcome::Mismatch& m : o.mismatches) {
    v1::ReplicaMismatch* w = v.add_mismatches();
    w->set_name(m.name);
    for (int32_t r : m.agreeing) w->add_agreeing(r);
    for (int32_t r : m.differing) w->add_differing(r);
  }
  for (int32_t r : o.missing) v.add_missing(r);
  v.set_message(o.message);
  v.set_mismatch_count(o.mismatch_count);
  return v;
}

}  // namespace parity::server
