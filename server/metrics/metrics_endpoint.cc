#include "server/metrics/metrics_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace parity::server {
namespace {

using Clock = std::chrono::steady_clock;

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     const std::string& body, bool head, absl::string_view extra_headers = "") {
  std::string out = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(), "\r\n", extra_headers,
                                 "Connection: close\r\n\r\n");
  if (!head) out += body;
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry) {
  std::string bind_host = host.empty() ? "0.0.0.0" : host;
  if (bind_host.size() > 2 && bind_host.front() == '[' && bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);  // "[::1]", as in a URL
  }
  const std::string where = absl::StrCat(bind_host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(bind_host.c_str(), std::to_string(port).c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", where, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = strerror(errno);
      continue;
    }
    const int one = 1;  // a restarted server may rebind while old connections are in TIME_WAIT
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", where, ": ", error,
                     error == strerror(EADDRINUSE) ? " (another process has the port)" : ""));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound =
      ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    const std::string why = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot serve metrics: pipe: ", why));
  }
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(fd, wake[0], wake[1], bound, std::move(registry)));
}

MetricsEndpoint::MetricsEndpoint(int listen_fd, int wake_read, int wake_write, int port,
                                 std::shared_ptr<prometheus::Registry> registry)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port),
      registry_(std::move(registry)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsEndpoint::~MetricsEndpoint() {
  stopping_.store(true);
  const char byte = 0;
  (void)!write(wake_write_, &byte, 1);
  thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

bool MetricsEndpoint::Wait(int fd, short events, int timeout_ms) const {
  pollfd p[2] = {{fd, events, 0}, {wake_read_, POLLIN, 0}};
  int rc;
  do {
    rc = poll(p, 2, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  return rc > 0 && p[1].revents == 0 && p[0].revents != 0 && !stopping_.load();
}

void MetricsEndpoint::Serve() {
  while (!stopping_.load()) {
    if (!Wait(listen_fd_, POLLIN, -1)) continue;  // woken to stop (the loop then ends)
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // Out of file descriptors, say: back off (until stopped) instead of spinning on a
      // readable socket.
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        pollfd wake{wake_read_, POLLIN, 0};
        poll(&wake, 1, 100);
      }
      continue;
    }
    Answer(fd);
    close(fd);
  }
}

void MetricsEndpoint::Answer(int fd) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(kClientTimeoutMs);
  std::string request;
  char buf[2048];
  std::string reply;
  while (request.find("\r\n\r\n") == std::string::npos && reply.empty()) {
    if (request.size() > kMaxRequestBytes) {
      reply = Response("431 Request Header Fields Too Large", "text/plain", "request too large\n",
                       false);
      break;
    }
    if (!Wait(fd, POLLIN, MillisecondsLeft(deadline))) return;  // timed out, or stopping
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // the client went away
    request.append(buf, static_cast<std::size_t>(n));
  }
  if (reply.empty()) {
    const std::string line = request.substr(0, request.find("\r\n"));
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    const bool head = !parts.empty() && parts[0] == "HEAD";
    if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
      reply = Response("400 Bad Request", "text/plain", "not an HTTP/1.x request\n", false);
    } else if (parts[0] != "GET" && !head) {
      reply = Response("405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                       "Allow: GET, HEAD\r\n");
    } else if (parts[1] != "/metrics" && !absl::StartsWith(parts[1], "/metrics?")) {
      reply = Response("404 Not Found", "text/plain", "this endpoint serves /metrics\n", head);
    } else {
      const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
      reply = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body, head);
    }
  }
  std::size_t sent = 0;
  while (sent < reply.size()) {
    if (!Wait(fd, POLLOUT, MillisecondsLeft(deadline))) return;
    const ssize_t n = send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
  // Lingering close: closing with unread request bytes (a refused oversized request) would reset
  // the connection, and the client could lose the answer before reading it. Read until the
  // client closes, for a second at most.
  shutdown(fd, SHUT_WR);
  const Clock::time_point linger = std::min(deadline, Clock::now() + std::chrono::seconds(1));
  while (Wait(fd, POLLIN, MillisecondsLeft(linger))) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
}

}  // namespace parity::server
