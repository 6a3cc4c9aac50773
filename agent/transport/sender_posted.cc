// The sender's options from a configuration, and the messages of the agent's own it posts (the
// replica reports, docs/replicas.md): written on its stream, or routed to their group's server.
#include <unistd.h>

#include "agent/transport/replica_routes.h"
#include "agent/transport/sender.h"
#include "common/config/config.h"
#include "common/transport/wire.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace parity::agent {

SenderOptions SenderOptionsFor(const common::AgentConfig& c, const std::string& framework_version,
                               const std::string& device_type) {
  SenderOptions s;
  static_cast<common::SenderKeys&>(s) = c.parity.sender;
  s.link = LinkOptions::From(c);
  v1::Hello& h = s.link.hello;
  h.set_protocol_version(common::kProtocolVersion);
  h.set_run_id(c.parity.run_id);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  h.set_hostname(host);
  h.set_pid(::getpid());
  h.set_agent_version(PARITY_VERSION);
  h.set_framework_version(framework_version);
  h.set_device_type(device_type);
  h.set_config_digest(common::AgentConfigDigest(c));
  // The server may answer with VerdictBatches; parity.batch_calls 1 asks for every message
  // alone, both ways.
  h.set_accepts_batches(s.batch_calls > 1);
  return s;
}

bool Sender::Post(std::shared_ptr<const v1::AgentMessage> message) {
  const uint64_t route =
      message->has_replica()
          ? ReplicaRoute(options_.link.hello.run_id(),
                         {message->replica().group().begin(), message->replica().group().end()})
          : 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || posted_.size() >= kMaxPostedMessages) return false;
    posted_.push_back({std::move(message), route});
    pending_.fetch_add(1);
  }
  pushed_.store(true);
  queue_.Wake();  // the sender, waiting for a call, writes it now
  return true;
}

void Sender::WritePosted() {
  std::vector<Posted> posted;
  {
    absl::MutexLock lock(&mu_);
    posted.swap(posted_);
  }
  // Several servers: each report goes to its group's (the route's stream counts it from there;
  // one it cannot take is counted unsent). One: on this stream.
  const std::size_t servers = routes_ ? conn_->server_count() : 1;
  std::size_t written = 0, routed = 0;
  for (; written < posted.size(); ++written) {
    if (servers > 1) {
      if (!routes_->Post(posted[written].route % servers, std::move(posted[written].message))) {
        counters_.ReplicaUnsent();
      }
      ++routed;
      continue;
    }
    if (!Write(posted[written].message, /*more=*/written + 1 < posted.size())) break;
  }
  absl::MutexLock lock(&mu_);
  reports_written_ += written - routed;
  // Not written (the stream failed under them): back to the front, for the next connection.
  posted_.insert(posted_.begin(), posted.begin() + static_cast<std::ptrdiff_t>(written),
                 posted.end());
  pending_.fetch_sub(written);
  cv_.SignalAll();
}

}  // namespace parity::agent
