#include "agent/transport/replica_routes.h"

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace parity::agent {

uint64_t ReplicaRoute(const std::string& run_id, const std::vector<int32_t>& group) {
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](uint8_t byte) {
    h ^= byte;
    h *= 1099511628211ull;
  };
  for (char c : run_id) mix(static_cast<uint8_t>(c));
  mix(0);
  for (int32_t rank : group) {
    const auto u = static_cast<uint32_t>(rank);
    for (int shift = 0; shift < 32; shift += 8) mix(static_cast<uint8_t>(u >> shift));
  }
  return h;
}

ReplicaRoutes::ReplicaRoutes(SenderOptions options, std::function<int64_t()> step)
    : options_(std::move(options)), step_(std::move(step)) {}

ReplicaRoutes::~ReplicaRoutes() { Close(); }

bool ReplicaRoutes::Post(std::size_t index, std::shared_ptr<const v1::AgentMessage> message) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  std::unique_ptr<Route>& route = routes_[index];
  if (!route) {
    route = std::make_unique<Route>();
    SenderOptions options = options_;
    options.replicas_only = true;
    options.connect_at_first_call = false;
    options.link.spread = static_cast<int64_t>(index);
    options.link.hello.set_replicas_only(true);
    options.on_refused = [index](const std::string& why) {
      common::LogWarning(absl::StrCat("replica route ", index, " refused: ", why));
    };
    route->sender = std::make_unique<Sender>(
        std::move(options), route->counters, [](const v1::Verdict&) {}, step_);
    route->sender->Start();
  }
  return route->sender->Post(std::move(message));
}

bool ReplicaRoutes::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Sender*> senders;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [index, route] : routes_) senders.push_back(route->sender.get());
  }
  bool all = true;
  for (Sender* s : senders) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    all = s->Flush(std::max(left, std::chrono::milliseconds(0))) && all;
  }
  return all;
}

void ReplicaRoutes::Close() {
  std::vector<Sender*> senders;  // kept until the destructor: a Flush may be reading them
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [index, route] : routes_) senders.push_back(route->sender.get());
  }
  for (Sender* s : senders) s->Close();
}

std::size_t ReplicaRoutes::size() const {
  absl::MutexLock lock(&mu_);
  return routes_.size();
}

}  // namespace parity::agent
