#include "server/call/replica_wire.h"

#include "common/transport/replica_rules.h"
#include "server/call/verdict_encoder.h"

namespace parity::server {

absl::StatusOr<ReplicaReport> ReplicaReportFromWire(const v1::ReplicaReport& in,
                                                    const std::string& run_id, int32_t rank) {
  if (absl::Status s = common::CheckReplicaReport(in, rank); !s.ok()) return s;
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
  for (const v1::ReplicaDigest& d : in.digests())
    r.digests.push_back({d.name(), d.digest(), d.bytes()});
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
