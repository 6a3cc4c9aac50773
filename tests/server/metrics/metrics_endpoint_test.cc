// The /metrics endpoint over real loopback sockets: what Prometheus reads, what other clients
// get, and that a stuck client neither blocks shutdown nor hides a busy port.
#include "server/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/server_harness.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

std::string Exchange(int port, const std::string& request) {
  absl::StatusOr<std::string> response = testing::HttpExchange(port, request);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : "";
}

std::string Get(int port, const std::string& path, const std::string& method = "GET") {
  return Exchange(port, method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter()
        .Name("parity_test_calls_total")
        .Help("calls")
        .Register(*registry_)
        .Add({{"op", "aten::gelu"}})
        .Increment(3);
    auto e = MetricsEndpoint::Start("127.0.0.1", 0, registry_);
    ASSERT_TRUE(e.ok()) << e.status();
    endpoint_ = *std::move(e);
    ASSERT_GT(endpoint_->port(), 0);
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

TEST_F(MetricsEndpointTest, ServesTheRegistryInPrometheusTextFormat) {
  const std::string r = Get(endpoint_->port(), "/metrics");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(r, HasSubstr("# TYPE parity_test_calls_total counter"));
  EXPECT_THAT(r, HasSubstr("parity_test_calls_total{op=\"aten::gelu\"} 3"));
  const std::string body = r.substr(r.find("\r\n\r\n") + 4);
  EXPECT_THAT(r, HasSubstr("Content-Length: " + std::to_string(body.size()) + "\r\n"));
  // Query strings (Prometheus adds none, other scrapers may) and HEAD.
  EXPECT_THAT(Get(endpoint_->port(), "/metrics?x=1"), StartsWith("HTTP/1.1 200 OK\r\n"));
  const std::string head = Get(endpoint_->port(), "/metrics", "HEAD");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "");
  // The answer follows the registry.
  prometheus::BuildCounter().Name("parity_test_late_total").Register(*registry_).Add({});
  EXPECT_THAT(Get(endpoint_->port(), "/metrics"), HasSubstr("parity_test_late_total 0"));
}

TEST_F(MetricsEndpointTest, OtherRequestsGetClearStatuses) {
  EXPECT_THAT(Get(endpoint_->port(), "/"), StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(Get(endpoint_->port(), "/metricsx"), StartsWith("HTTP/1.1 404 Not Found\r\n"));
  const std::string post = Get(endpoint_->port(), "/metrics", "POST");
  EXPECT_THAT(post, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(Exchange(endpoint_->port(), "hello\r\n\r\n"),
              StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(Exchange(endpoint_->port(), "GET /metrics SPDY/3\r\n\r\n"),
              StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  // Headers that never end are cut off, not buffered.
  const std::string flood =
      "GET /metrics HTTP/1.1\r\nX: " + std::string(2 * MetricsEndpoint::kMaxRequestBytes, 'a');
  const std::string r = Exchange(endpoint_->port(), flood);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(r, Not(HasSubstr("parity_test_calls_total")));
  // Still serving.
  EXPECT_THAT(Get(endpoint_->port(), "/metrics"), StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST_F(MetricsEndpointTest, AStuckClientDoesNotHoldUpShutdown) {
  const int idle = Connect(endpoint_->port());  // connects, never sends a byte
  // The endpoint is serving it now (one client at a time); stopping must not wait for its
  // kClientTimeoutMs.
  auto stopped = std::async(std::launch::async, [this] { endpoint_.reset(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(MetricsEndpoint::kClientTimeoutMs - 1000)),
            std::future_status::ready);
  stopped.wait();
  close(idle);
}

TEST_F(MetricsEndpointTest, ListensOnIPv6WrittenEitherWay) {
  const int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_loopback;
  const bool ipv6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0;
  if (probe >= 0) close(probe);
  if (!ipv6) GTEST_SKIP() << "this host has no IPv6 loopback";
  for (const std::string host : {"::1", "[::1]"}) {
    SCOPED_TRACE(host);
    auto e = MetricsEndpoint::Start(host, 0, registry_);
    ASSERT_TRUE(e.ok()) << e.status();
    const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 addr = any;
    addr.sin6_port = htons(static_cast<uint16_t>((*e)->port()));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string req = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    char buf[64] = {};
    EXPECT_GT(recv(fd, buf, sizeof(buf) - 1, MSG_WAITALL), 0);
    EXPECT_THAT(std::string(buf), StartsWith("HTTP/1.1 200 OK"));
    close(fd);
  }
}

TEST_F(MetricsEndpointTest, ABusyPortOrABadHostIsAClearError) {
  auto second = MetricsEndpoint::Start("127.0.0.1", endpoint_->port(), registry_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr("cannot serve metrics on 127.0.0.1:" + std::to_string(endpoint_->port())));
  EXPECT_THAT(second.status().message(), HasSubstr("another process has the port"));
  auto bad = MetricsEndpoint::Start("no-such-host.invalid", 0, registry_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cannot serve metrics on no-such-host.invalid:0"));
}

}  // namespace
}  // namespace parity::server
