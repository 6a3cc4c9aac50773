// The server's Prometheus endpoint: GET /metrics over plain HTTP/1.1, in the text exposition
// format, from one thread. Written for Parity instead of prometheus-cpp's pull library, which
// serves through civetweb: distributions build civetweb with 100 KiB thread stacks, and a process
// that has loaded libtorch_cuda needs more static TLS than that in every thread, so civetweb
// cannot start one ("Cannot create first worker thread") and a server on a GPU host could not
// serve metrics at all (seen on an H100 with torch 2.11).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace prometheus {
class Registry;
}

namespace parity::server {

class MetricsEndpoint {
 public:
  // Listens on host:port ("" or "0.0.0.0": every IPv4 address; "::1" or "[::1]": IPv6; port 0:
  // an ephemeral one) and
  // serves `registry`. UNAVAILABLE, saying why, when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();  // stops at once, even with a client connected

  int port() const { return port_; }

  // A client has this long to send its request and read the answer (one client at a time).
  static constexpr int kClientTimeoutMs = 5000;
  // Requests longer than this are refused (431).
  static constexpr std::size_t kMaxRequestBytes = 8192;

 private:
  MetricsEndpoint(int listen_fd, int wake_read, int wake_write, int port,
                  std::shared_ptr<prometheus::Registry> registry);
  void Serve();
  void Answer(int fd);
  // Waits for `fd` to be readable (or writable): false on timeout or when stopping.
  bool Wait(int fd, short events, int timeout_ms) const;

  const int listen_fd_, wake_read_, wake_write_, port_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace parity::server
