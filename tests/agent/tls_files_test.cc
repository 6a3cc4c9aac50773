// TLS set up as msprobe's users do it: passphrase-protected private keys (the passphrase from
// $PARITY_TLS_KEY_PASSWORD or a file the config names, never from a prompt, the command line or
// a log) and a certificate revocation list (crl.pem in tls_path) honoured by the server against
// clients and by the agent against the server, with real gRPC over loopback.
#include <cstdlib>
#include <fstream>

#include "common/transport/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app/server.h"
#include "tests/agent/agent_testing.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace parity::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassphrase[] = "correct horse battery staple";

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// $PARITY_TLS_KEY_PASSWORD for one scope.
class ScopedPasswordEnv {
 public:
  explicit ScopedPasswordEnv(const char* value) {
    if (value != nullptr) {
      setenv("PARITY_TLS_KEY_PASSWORD", value, 1);
    } else {
      unsetenv("PARITY_TLS_KEY_PASSWORD");
    }
  }
  ~ScopedPasswordEnv() { unsetenv("PARITY_TLS_KEY_PASSWORD"); }
};

struct Pki {
  parity::testing::KeyPair ca = parity::testing::MakeCa("Parity Test CA");
  parity::testing::KeyPair server = parity::testing::MakeLeaf(ca, {"localhost", -1, 30});
  parity::testing::KeyPair client = parity::testing::MakeLeaf(ca, {"rank0", -1, 30});
  parity::testing::KeyPair revoked_client = parity::testing::MakeLeaf(ca, {"stolen", -1, 30});
  std::string root = parity::testing::MakeTempDir("parity_tls_files_");
};

TEST(TlsFilesTest, AnEncryptedKeyLoadsWithTheRightPassphraseOnly) {
  const Pki pki;
  parity::testing::KeyPair server = pki.server;
  server.key_pem = parity::testing::EncryptKey(server.key_pem, kPassphrase);
  parity::testing::KeyPair client = pki.client;
  client.key_pem = parity::testing::EncryptKey(client.key_pem, kPassphrase);
  ASSERT_THAT(server.key_pem, HasSubstr("ENCRYPTED"));
  const std::string server_dir =
      parity::testing::WriteTlsDir(pki.root + "/server", pki.ca.cert_pem, server, {});
  const std::string client_dir =
      parity::testing::WriteTlsDir(pki.root + "/client", pki.ca.cert_pem, {}, client);
  const std::string right = pki.root + "/right", wrong = pki.root + "/wrong";
  WriteText(right, std::string(kPassphrase) + "\n");
  WriteText(wrong, "hunter2\n");

  {
    const ScopedPasswordEnv none(nullptr);
    auto s = common::LoadServerTls(server_dir);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("server.key: the private key is passphrase-"));
    EXPECT_THAT(s.status().message(), HasSubstr("PARITY_TLS_KEY_PASSWORD"));
    auto c = common::LoadChannelTls(client_dir);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.status().message(), HasSubstr("client.key: the private key is passphrase-"));

    s = common::LoadServerTls(server_dir, wrong);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("the passphrase from the key password file " +
                                                wrong + " does not decrypt the private key"));
    EXPECT_THAT(s.status().message(), Not(HasSubstr("hunter2")));
    c = common::LoadChannelTls(client_dir, wrong);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.status().message(), HasSubstr("does not decrypt"));

    EXPECT_TRUE(common::LoadServerTls(server_dir, right).ok());
    EXPECT_TRUE(common::LoadChannelTls(client_dir, right).ok());
  }
  {
    const ScopedPasswordEnv env("hunter2");
    auto s = common::LoadServerTls(server_dir);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("from $PARITY_TLS_KEY_PASSWORD does not decrypt"));
    EXPECT_THAT(s.status().message(), Not(HasSubstr("hunter2")));
    // A configured file wins over the environment.
    EXPECT_TRUE(common::LoadServerTls(server_dir, right).ok());
  }
  {
    const ScopedPasswordEnv env(kPassphrase);
    EXPECT_TRUE(common::LoadServerTls(server_dir).ok());
    EXPECT_TRUE(common::LoadChannelTls(client_dir).ok());
    // Both ends with encrypted keys over mutual TLS: the server checks a call from the client.
    server::ServerConfig config =
        parity::testing::TestServerConfig(parity::testing::MakeTempDir("parity_out_"), server_dir);
    auto created = server::ParityServer::Create(config);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE((*created)->Start().ok());
    parity::testing::TestStream stream(
        parity::testing::TestChannel((*created)->port(), client_dir));
    EXPECT_TRUE(stream.Hello()) << stream.status().error_message();
    EXPECT_TRUE(stream.Close().ok());
  }
}

TEST(TlsFilesTest, ARevocationListIsCheckedWhenLoaded) {
  const Pki pki;
  const std::string dir =
      parity::testing::WriteTlsDir(pki.root + "/dir", pki.ca.cert_pem, pki.server, pki.client);
  // Signed by another CA.
  const parity::testing::KeyPair other = parity::testing::MakeCa("Some Other CA");
  WriteText(dir + "/crl.pem", parity::testing::MakeCrl(other, {}));
  auto s = common::LoadServerTls(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("crl.pem: not issued and signed by the CA of ca.crt"));
  // Past its nextUpdate.
  WriteText(dir + "/crl.pem", parity::testing::MakeCrl(pki.ca, {}, -1));
  auto c = common::LoadChannelTls(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("crl.pem: out of date since"));
  // Not a CRL.
  WriteText(dir + "/crl.pem", pki.ca.cert_pem);
  s = common::LoadServerTls(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("not a PEM certificate revocation list"));
  // A server without ca.crt sees no client certificates to revoke.
  const std::string no_ca = parity::testing::WriteTlsDir(pki.root + "/no_ca", "", pki.server, {});
  WriteText(no_ca + "/crl.pem", parity::testing::MakeCrl(pki.ca, {}));
  s = common::LoadServerTls(no_ca);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("add ca.crt (mutual TLS) or remove crl.pem"));
  // A current one loads and names what it holds.
  WriteText(dir + "/crl.pem", parity::testing::MakeCrl(pki.ca, {pki.revoked_client.cert_pem}));
  s = common::LoadServerTls(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_NE(s->crl, nullptr);
  EXPECT_THAT(s->description, HasSubstr("crl.pem (1 revoked"));
  EXPECT_THAT(s->crl->Revoked(pki.revoked_client.cert_pem), HasSubstr("CN=stolen"));
  EXPECT_EQ(s->crl->Revoked(pki.client.cert_pem), "");
}

TEST(TlsFilesTest, TheServerRefusesARevokedClientCertificate) {
  const Pki pki;
  const std::string server_dir =
      parity::testing::WriteTlsDir(pki.root + "/server", pki.ca.cert_pem, pki.server, {});
  WriteText(server_dir + "/crl.pem",
            parity::testing::MakeCrl(pki.ca, {pki.revoked_client.cert_pem}));
  const std::string good =
      parity::testing::WriteTlsDir(pki.root + "/good", pki.ca.cert_pem, {}, pki.client);
  const std::string stolen =
      parity::testing::WriteTlsDir(pki.root + "/stolen", pki.ca.cert_pem, {}, pki.revoked_client);
  auto created = server::ParityServer::Create(
      parity::testing::TestServerConfig(parity::testing::MakeTempDir("parity_out_"), server_dir));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE((*created)->Start().ok());
  {
    parity::testing::TestStream stream(parity::testing::TestChannel((*created)->port(), stolen));
    EXPECT_FALSE(stream.Hello());
    EXPECT_EQ(stream.status().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(stream.status().error_message(), HasSubstr("CN=stolen"));
    EXPECT_THAT(stream.status().error_message(), HasSubstr("was revoked on"));
  }
  parity::testing::TestStream stream(parity::testing::TestChannel((*created)->port(), good));
  EXPECT_TRUE(stream.Hello()) << stream.status().error_message();
  EXPECT_TRUE(stream.Close().ok());
}

TEST(TlsFilesTest, TheAgentRefusesARevokedServerAndSendsItNoCall) {
  const Pki pki;
  const std::string server_dir =
      parity::testing::WriteTlsDir(pki.root + "/server", pki.ca.cert_pem, pki.server, {});
  std::atomic<int> calls{0};
  auto created = server::ParityServer::Create(
      parity::testing::TestServerConfig(parity::testing::MakeTempDir("parity_out_"), server_dir),
      [&calls](const server::CallOrigin&, const parity::server::ServerCall&,
               const parity::common::BlobSource&) {
        ++calls;
        parity::server::CallOutcome check;
        check.status = parity::server::CheckStatus::kPass;
        return check;
      });
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE((*created)->Start().ok());

  auto run_agent = [&](const std::string& tls_dir) {
    common::AgentConfig config = testing::Config((*created)->port());
    config.parity.link.plaintext = false;
    config.tls_path = tls_dir;
    config.parity.link.server_name = "localhost";
    config.parity.sender.flush_timeout_ms = 2000;
    const torch::Tensor x = torch::ones({4});
    auto agent = testing::StartAgent(config);
    for (int i = 0; i < 3; ++i) torch::add(x, x);
    agent->Flush(3000);
    agent->Close();
    return agent->GetCounters();
  };
  // The agent's crl.pem revokes the server's certificate.
  const std::string revoking =
      parity::testing::WriteTlsDir(pki.root + "/revoking", pki.ca.cert_pem, {}, pki.client);
  WriteText(revoking + "/crl.pem", parity::testing::MakeCrl(pki.ca, {pki.server.cert_pem}));
  const Counters refused = run_agent(revoking);
  EXPECT_EQ(calls.load(), 0) << "a call reached a revoked server";
  EXPECT_EQ(refused.captured, 3u);
  EXPECT_EQ(refused.sent, 0u);
  EXPECT_FALSE(refused.connected);
  // The same agent with a CRL that does not list the server gets its calls checked.
  WriteText(revoking + "/crl.pem", parity::testing::MakeCrl(pki.ca, {pki.revoked_client.cert_pem}));
  const Counters accepted = run_agent(revoking);
  EXPECT_EQ(accepted.sent, 3u);
  EXPECT_EQ(calls.load(), 3);
}

}  // namespace
}  // namespace parity::agent
