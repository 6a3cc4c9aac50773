// The agent's link to its server alone (agent/transport/connection.h): each attempt's outcome is
// one LinkState, the one the sender paces its attempts by and the end of a session decides by.
#include "agent/transport/connection.h"
#include "parity/v1/parity.pb.h"

#include <sys/socket.h>
#include <unistd.h>

#include "agent/transport/sender.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_testing.h"
#include "tests/testing/tls_peer.h"

namespace parity::agent {
namespace {

using testing::Config;
using testing::RecordingServer;
using testing::UnusedPort;

// A Connection with the options a session would give it.
struct Link {
  // `world_size` 0: a Hello the server refuses (the session fills it in).
  explicit Link(const common::AgentConfig& config, int32_t world_size = 1)
      : options(WithWorld(SenderOptionsFor(config, "torch test", "cpu").link, world_size)),
        connection(options, counters, Verdicts()) {}
  static LinkOptions WithWorld(LinkOptions o, int32_t world_size) {
    o.hello.set_world_size(world_size);
    return o;
  }
  static Connection::Callbacks Verdicts() {
    Connection::Callbacks callbacks;
    callbacks.on_verdict = [](const v1::Verdict&) {};
    return callbacks;
  }
  LinkOptions options;
  AgentCounters counters;
  Connection connection;
};

TEST(ConnectionTest, NoServerIsUnreachableAndAServerIsConnected) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.link.connect_timeout_ms = 500;
  Link nobody(config);
  EXPECT_EQ(nobody.connection.state(), LinkState::kNotConnected);
  EXPECT_FALSE(nobody.connection.Connect(/*closing=*/false));
  EXPECT_EQ(nobody.connection.state(), LinkState::kUnreachable);
  EXPECT_TRUE(nobody.connection.unreachable());
  EXPECT_FALSE(nobody.connection.undeliverable());

  RecordingServer server;
  // A Hello the server refuses for what it says (no world size: the session fills it in) is
  // not fixed by retrying: undeliverable.
  Link refused(Config(server.port()), /*world_size=*/0);
  EXPECT_FALSE(refused.connection.Connect(false));
  EXPECT_EQ(refused.connection.state(), LinkState::kUndeliverable);
  EXPECT_FALSE(refused.connection.Connect(false));
  EXPECT_EQ(refused.connection.state(), LinkState::kUndeliverable);
  Link link(Config(server.port()));
  ASSERT_TRUE(link.connection.Connect(false));
  EXPECT_EQ(link.connection.state(), LinkState::kConnected);
  EXPECT_GT(link.connection.limits().max_batch_bytes, 0u);
  link.connection.Disconnect(/*quiet=*/true);
  EXPECT_EQ(link.connection.state(), LinkState::kNotConnected);
}

TEST(ConnectionTest, UnusableTlsMaterialIsUndeliverable) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.link.plaintext = false;
  config.tls_path = "/nonexistent/parity-tls";
  Link link(config);
  EXPECT_FALSE(link.connection.Connect(false));
  EXPECT_EQ(link.connection.state(), LinkState::kUndeliverable);
  EXPECT_TRUE(link.connection.undeliverable());
}

TEST(ConnectionTest, APortThatIsNotAParityServerIsUnreachable) {
  // Accepts TCP, never speaks: the attempt times out and the diagnosis says so.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  common::AgentConfig config = Config(ntohs(addr.sin_port));
  config.parity.link.connect_timeout_ms = 300;
  Link link(config);
  EXPECT_FALSE(link.connection.Connect(false));
  EXPECT_EQ(link.connection.state(), LinkState::kUnreachable);
  ::close(fd);
}

// The session's first attempt holds the training's calls (policy block) for at most
// connect_timeout_ms: the attempt says its wait is over before it diagnoses the failure, which
// takes up to connect_timeout_ms again. Against a port that accepts TCP and never speaks (a
// stopped server) and a TLS server that completes the handshake and then says nothing, the
// callback comes while the link is still not connected (no diagnosis yet), and the attempt then
// ends unreachable with its diagnosis. (session_test.cc: the training's calls, from a full queue.)
TEST(ConnectionTest, AnAttemptSaysItsWaitIsOverBeforeItDiagnosesTheFailure) {
  parity::testing::TlsPeerPki pki;
  parity::testing::LoopbackPeer listen_only(/*accept=*/false, nullptr);
  parity::testing::LoopbackPeer tls_then_silent(/*accept=*/true, [&](int fd, int) {
    parity::testing::ServeTls(pki, /*refuse_alpn=*/false, fd, /*linger_ms=*/60000);
  });
  for (const int port : {listen_only.port(), tls_then_silent.port()}) {
    SCOPED_TRACE(port == listen_only.port() ? "listen-only port" : "TLS, then silent");
    common::AgentConfig config = Config(port);
    config.parity.link.plaintext = false;
    config.tls_path = pki.agent_dir;
    config.parity.link.connect_timeout_ms = 300;
    AgentCounters counters;
    int wait_over = 0;
    LinkState state_at_wait_over = LinkState::kConnected;
    std::unique_ptr<Connection> connection;
    Connection::Callbacks callbacks;
    callbacks.on_verdict = [](const v1::Verdict&) {};
    callbacks.on_wait_over = [&] {
      ++wait_over;
      state_at_wait_over = connection->state();
    };
    connection = std::make_unique<Connection>(SenderOptionsFor(config, "torch test", "cpu").link,
                                              counters, callbacks);
    EXPECT_FALSE(connection->Connect(/*closing=*/false));
    EXPECT_EQ(wait_over, 1);
    EXPECT_EQ(state_at_wait_over, LinkState::kNotConnected) << "diagnosed before the wait ended";
    EXPECT_EQ(connection->state(), LinkState::kUnreachable);
  }
}

}  // namespace
}  // namespace parity::agent
