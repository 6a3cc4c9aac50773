// The session's replica reports and their verdicts (docs/replicas.md).
#include "absl/strings/str_cat.h"
#include "agent/transport/sender.h"
#include "agent/transport/session.h"
#include "common/base/log.h"
#include "common/transport/replica_rules.h"

namespace parity::agent {

bool Session::ReportReplicas(v1::ReplicaReport report) {
  if (report.step() < 0) report.set_step(names_.step());
  // A report the server would refuse would end the stream, and the calls in flight on it: it is
  // refused here instead, with its reason (logged once per kind and op).
  if (absl::Status s = common::CheckReplicaReport(report, rank_); !s.ok()) {
    counters_.ReplicaUnsent();
    absl::MutexLock lock(&mu_);
    if (logged_error_ops_
            .emplace(absl::StrCat("bad replica ", report.kind(), " ", report.op()), true)
            .second) {
      common::LogWarning(absl::StrCat("replica report of ", report.kind(), " of ", report.op(),
                                      " not sent: ", s.message()));
    }
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || ended_.load() || refused_ || !sender_) {
      counters_.ReplicaUnsent();
      return false;
    }
  }
  auto m = std::make_shared<v1::AgentMessage>();
  *m->mutable_replica() = std::move(report);
  if (!sender_->Post(std::move(m))) {
    counters_.ReplicaUnsent();
    return false;
  }
  counters_.ReplicaReported();
  return true;
}

void Session::OnReplicaVerdict(const v1::ReplicaVerdict& v) {
  counters_.ReplicaVerdict(v.status());
  if (v.status() != v1::VERDICT_STATUS_ERROR) return;
  const std::string text = absl::StrCat("replica mismatch: step ", v.step(), ", ", v.kind(), " of ",
                                        v.op(), ": ", v.message());
  absl::MutexLock lock(&mu_);
  if (first_error_.empty()) first_error_ = text;  // fail_fast raises at the next step()
  if (logged_error_ops_.emplace(absl::StrCat("replica ", v.kind(), " ", v.op()), true).second) {
    common::LogWarning(text);
  }
}

}  // namespace parity::agent
