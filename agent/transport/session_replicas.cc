// The session's replica reports and their verdicts (docs/replicas.md).
#include "absl/strings/str_cat.h"
#include "agent/transport/sender.h"
#include "agent/transport/session.h"
#include "common/base/log.h"

namespace parity::agent {

bool Session::ReportReplicas(v1::ReplicaReport report) {
  if (report.step() < 0) report.set_step(names_.step());
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
