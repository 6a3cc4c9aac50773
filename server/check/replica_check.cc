#include "server/check/replica_check.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/log.h"
#include "server/metrics/metrics.h"
#include "server/results/append_file.h"
#include "server/results/replica_writer.h"

namespace parity::server {
namespace {

// What a rank holds for one name: absent, or its algorithm, digest and size.
using Held = std::tuple<bool, std::string, uint64_t, uint64_t>;

std::string RankList(const std::vector<int32_t>& ranks) {
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  return absl::StrCat("ranks ", absl::StrJoin(ranks, ", "));
}

}  // namespace

namespace {

// One name's mismatch among the reporting ranks (`held`: what each holds), or none when they all
// hold the same.
std::optional<ReplicaOutcome::Mismatch> MismatchOf(const std::string& name,
                                                   const std::map<int32_t, Held>& held,
                                                   const std::vector<int32_t>& reported) {
  std::map<Held, std::vector<int32_t>> by_value;
  for (int32_t rank : reported) {
    auto it = held.find(rank);
    by_value[it == held.end() ? Held{false, "", 0, 0} : it->second].push_back(rank);
  }
  if (by_value.size() == 1) return std::nullopt;
  ReplicaOutcome::Mismatch m;
  m.name = name;
  const auto largest = std::max_element(
      by_value.begin(), by_value.end(),
      [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (largest->second.size() * 2 <= reported.size()) {
    m.differing = reported;  // no majority: every rank is named
    return m;
  }
  m.agreeing = largest->second;
  for (const auto& [value, ranks] : by_value) {
    if (&ranks != &largest->second)
      m.differing.insert(m.differing.end(), ranks.begin(), ranks.end());
  }
  std::sort(m.differing.begin(), m.differing.end());
  return m;
}

std::string MismatchMessage(const ReplicaOutcome& o) {
  const ReplicaOutcome::Mismatch& m = o.mismatches[0];
  return absl::StrCat(
      "silent data corruption: ", o.mismatch_count, " of ", o.digests, " digests differ across ",
      o.reported.size(), " ranks; the first, ", m.name, ": ",
      m.agreeing.empty()
          ? absl::StrCat(RankList(m.differing), " all differ (no majority: each is named)")
          : absl::StrCat(RankList(m.differing), " differ", m.differing.size() == 1 ? "s" : "",
                         " from the majority (", RankList(m.agreeing), ")"));
}

}  // namespace

ReplicaOutcome CompareReplicas(const std::vector<const ReplicaReport*>& reports) {
  ReplicaOutcome o;
  if (reports.empty()) return o;
  const ReplicaReport& first = *reports[0];
  o.run_id = first.run_id;
  o.group = first.group;
  o.step = first.step;
  o.sequence = first.sequence;
  o.kind = first.kind;
  o.op = first.op;
  for (const ReplicaReport* r : reports) o.reported.push_back(r->rank);
  std::sort(o.reported.begin(), o.reported.end());
  std::set_difference(o.group.begin(), o.group.end(), o.reported.begin(), o.reported.end(),
                      std::back_inserter(o.missing));
  const std::string missing =
      o.missing.empty()
          ? ""
          : absl::StrCat("; ", RankList(o.missing), " did not report within the wait (not blamed)");
  if (reports.size() < 2) {
    o.status = CheckStatus::kSkip;
    o.message = absl::StrCat("only rank ", first.rank, " reported: nothing to compare", missing);
    return o;
  }
  // Every name, in the order the reports list them (the first report's, then any others').
  std::vector<std::string> names;
  std::map<std::string, std::map<int32_t, Held>> held;
  for (const ReplicaReport* r : reports) {
    o.digests = std::max(o.digests, r->digests.size());
    for (const ReplicaReport::Digest& d : r->digests) {
      auto [it, added] = held.try_emplace(d.name);
      if (added) names.push_back(d.name);
      it->second.try_emplace(r->rank, Held{true, r->algorithm, d.digest, d.bytes});
    }
  }
  for (const std::string& name : names) {
    std::optional<ReplicaOutcome::Mismatch> m = MismatchOf(name, held[name], o.reported);
    if (!m) continue;
    ++o.mismatch_count;
    if (o.mismatches.size() < kMaxReplicaMismatches) o.mismatches.push_back(std::move(*m));
  }
  o.status = o.mismatch_count == 0 ? CheckStatus::kPass : CheckStatus::kError;
  o.message = o.mismatch_count == 0
                  ? absl::StrCat(o.reported.size(), " ranks agree on ", o.digests, " digests")
                  : MismatchMessage(o);
  o.message += missing;
  return o;
}

ReplicaChecker::ReplicaChecker(ReplicaOptions options, ReplicaWriter* writer,
                               ServerMetrics* metrics)
    : options_(options), writer_(writer), metrics_(metrics), thread_([this] { Run(); }) {}

ReplicaChecker::~ReplicaChecker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
  }
  thread_.join();
  CompareWaiting();
}

uint64_t ReplicaChecker::BytesOf(const ReplicaReport& r) {
  uint64_t bytes = sizeof(ReplicaReport) + r.run_id.size() + r.kind.size() + r.op.size() +
                   r.algorithm.size() + r.group.size() * sizeof(int32_t) +
                   r.digests.size() * sizeof(ReplicaReport::Digest);
  for (const ReplicaReport::Digest& d : r.digests) bytes += d.name.size();
  return bytes;
}

std::string ReplicaChecker::KeyOf(const ReplicaReport& r) {
  // Length-prefixed fields: no two keys of different reports concatenate alike.
  return absl::StrCat(r.run_id.size(), ":", r.run_id, "|", absl::StrJoin(r.group, ","), "|", r.step,
                      "|", r.kind, "|", r.sequence, "|", r.op.size(), ":", r.op);
}

void ReplicaChecker::Report(ReplicaReport report, std::shared_ptr<ReplicaMailbox> mailbox) {
  std::vector<Waiting> here;  // compared on this thread: the budget is spent by queued groups
  {
    absl::MutexLock lock(&mu_);
    const std::string key = KeyOf(report);
    auto [it, added] = waiting_.try_emplace(key);
    Waiting& w = it->second;
    if (added) w.deadline = Clock::now() + std::chrono::milliseconds(options_.wait_ms);
    for (const auto& [r, unused] : w.reports) {
      if (r.rank == report.rank) {
        common::LogWarning(absl::StrCat("replica report of rank ", report.rank, " for step ",
                                        report.step, " ", report.kind, " ", report.op, " #",
                                        report.sequence, " came twice; the second is ignored"));
        return;
      }
    }
    const uint64_t bytes = BytesOf(report);
    w.bytes += bytes;
    held_bytes_ += bytes;
    const std::size_t group = report.group.size();
    w.reports.emplace_back(std::move(report), std::move(mailbox));
    if (w.reports.size() == group) {
      ready_.push_back(std::move(w));
      waiting_.erase(it);
    }
    // Bounded: past either cap, the groups that waited longest are compared with what they have.
    while (waiting_.size() > options_.max_waiting_groups) TakeOldest(&ready_);
    if (held_bytes_ > options_.max_waiting_bytes && !warned_bytes_) {
      warned_bytes_ = true;
      common::LogWarning(absl::StrCat(
          "replica reports held reach ", held_bytes_, " bytes (the bound is ",
          options_.max_waiting_bytes,
          "): groups are compared before all their ranks report "
          "(their ranks counted missing); ranks far apart in steps, or very large reports"));
    }
    while (held_bytes_ > options_.max_waiting_bytes && TakeOldest(&ready_)) {
    }
    // Still past it: the complete groups queue faster than the checker's thread compares them.
    if (held_bytes_ > options_.max_waiting_bytes) here.swap(ready_);
    changed_.SignalAll();
  }
  for (Waiting& w : here) Conclude(std::move(w));
}

bool ReplicaChecker::TakeOldest(std::vector<Waiting>* out) {
  if (waiting_.empty()) return false;
  auto oldest = std::min_element(
      waiting_.begin(), waiting_.end(),
      [](const auto& a, const auto& b) { return a.second.deadline < b.second.deadline; });
  out->push_back(std::move(oldest->second));
  waiting_.erase(oldest);
  return true;
}

void ReplicaChecker::CompareWaiting() {
  std::vector<Waiting> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(ready_);
    for (auto& [key, w] : waiting_) all.push_back(std::move(w));
    waiting_.clear();
  }
  for (Waiting& w : all) Conclude(std::move(w));
}

std::size_t ReplicaChecker::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

uint64_t ReplicaChecker::waiting_bytes() const {
  absl::MutexLock lock(&mu_);
  return held_bytes_;
}

void ReplicaChecker::Release(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  held_bytes_ -= bytes;
}

void ReplicaChecker::Conclude(Waiting w) {
  std::vector<const ReplicaReport*> reports;
  for (const auto& [r, mailbox] : w.reports) reports.push_back(&r);
  const ReplicaOutcome o = CompareReplicas(reports);
  if (o.status == CheckStatus::kError)
    common::LogWarning(absl::StrCat("replicas of run ", o.run_id, ", step ", o.step, ", ", o.kind,
                                    " of ", o.op, " #", o.sequence, ": ", o.message));
  if (writer_ != nullptr) {
    if (absl::Status s = writer_->Write(o); !s.ok()) {
      common::LogWarning(absl::StrCat("replica result row not written: ", s.ToString()));
      if (metrics_ != nullptr) metrics_->ResultRowsLost(RowsLostReason(s));
    }
  }
  if (metrics_ != nullptr) {
    metrics_->ReplicaChecked(o.kind, o.status, o.mismatch_count, o.missing.size());
  }
  for (const auto& [r, mailbox] : w.reports) {
    if (mailbox) mailbox->Deliver(o);
  }
  Release(w.bytes);
}

void ReplicaChecker::Run() {
  mu_.Lock();
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    std::vector<Waiting> due;
    due.swap(ready_);
    Clock::time_point next = now + std::chrono::hours(1);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.deadline <= now) {
        due.push_back(std::move(it->second));
        it = waiting_.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    if (!due.empty()) {
      mu_.Unlock();
      for (Waiting& w : due) Conclude(std::move(w));
      mu_.Lock();
      continue;
    }
    changed_.WaitWithTimeout(&mu_, absl::FromChrono(next - now));
  }
  mu_.Unlock();
}

}  // namespace parity::server
