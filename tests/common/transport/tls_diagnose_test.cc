// common::DiagnoseTlsConnection against real sockets that misbehave in each way a user meets:
// a peer that accepts TCP and never answers (a SIGSTOPped or wedged server), one that hangs up,
// a TLS peer that refuses the agent's ALPN (not gRPC), one that completes the handshake and then
// says nothing, and one that hangs up right after it. Each must be named for what it is, and
// never blamed on the agent's certificate. (tests/server/app/server_test.cc covers the diagnoses
// against a real parity-server: refused and untrusted certificates, wrong name, plaintext.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include "common/transport/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_certs.h"

namespace parity::common {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A loopback listener whose accepted connections `behave` handles, on its own thread.
class Peer {
 public:
  // `accept` false: never accept (the kernel still completes the TCP handshake: the backlog).
  Peer(bool accept, std::function<void(int fd)> behave) : behave_(std::move(behave)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    if (accept) {
      thread_ = std::thread([this] {
        const int client = ::accept(fd_, nullptr, nullptr);
        if (client >= 0) {
          behave_(client);
          ::close(client);
        }
      });
    }
  }
  ~Peer() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

 private:
  std::function<void(int)> behave_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Throw-away PKI: the agent's tls_path (ca.crt only) and a server key pair.
struct Pki {
  testing::KeyPair ca = testing::MakeCa("Diagnose CA");
  testing::KeyPair server = testing::MakeLeaf(ca, {"localhost", -1, 30});
  std::string agent_dir =
      testing::WriteTlsDir(testing::MakeTempDir("parity_diag_") + "/agent", ca.cert_pem, {}, {});
};

// A TLS server on `fd` with the test's certificate; `alpn_ok` false refuses every ALPN protocol
// (as a TLS server that does not speak HTTP/2 would).
SSL_CTX* ServerContext(const Pki& pki, bool refuse_alpn) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  BIO* cert =
      BIO_new_mem_buf(pki.server.cert_pem.data(), static_cast<int>(pki.server.cert_pem.size()));
  BIO* key =
      BIO_new_mem_buf(pki.server.key_pem.data(), static_cast<int>(pki.server.key_pem.size()));
  X509* x = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
  EVP_PKEY* k = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
  EXPECT_EQ(SSL_CTX_use_certificate(ctx, x), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx, k), 1);
  X509_free(x);
  EVP_PKEY_free(k);
  BIO_free(cert);
  BIO_free(key);
  if (refuse_alpn) {
    SSL_CTX_set_alpn_select_cb(
        ctx,
        [](SSL*, const unsigned char**, unsigned char*, const unsigned char*, unsigned int, void*) {
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        },
        nullptr);
  }
  return ctx;
}

// Serves one TLS handshake on `fd`, then does `after` (0: hang up, else wait that many ms).
void ServeTls(const Pki& pki, bool refuse_alpn, int fd, int linger_ms) {
  SSL_CTX* ctx = ServerContext(pki, refuse_alpn);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) == 1 && linger_ms > 0) {
    char buf[256];
    timeval tv{linger_ms / 1000, (linger_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (SSL_read(ssl, buf, sizeof(buf)) > 0) {
    }
  } else if (linger_ms == 0) {
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
}

std::string Diagnose(const Pki& pki, int port, int timeout_ms = 300) {
  return DiagnoseTlsConnection("127.0.0.1", port, pki.agent_dir, "localhost", timeout_ms);
}

TEST(TlsDiagnoseTest, AServerThatNeverAnswersTheHandshakeIsATimeout) {
  Pki pki;
  Peer hung(/*accept=*/false, nullptr);  // a stopped server: TCP accepted by the kernel only
  EXPECT_THAT(Diagnose(pki, hung.port()),
              AllOf(HasSubstr("accepted the TCP connection but did not complete the TLS "
                              "handshake within 300 ms"),
                    HasSubstr("hung"), Not(HasSubstr("certificate"))));
}

TEST(TlsDiagnoseTest, APeerThatHangsUpIsNotBlamedOnTheCertificateItNeverSaw) {
  Pki pki;
  Peer closes(/*accept=*/true, [](int) {});
  // No client certificate here: "closed" reads as "requires one" (the TLS 1.2 way to refuse).
  EXPECT_THAT(Diagnose(pki, closes.port()), HasSubstr("requires a client certificate"));
  // With one, a silent hang-up may be a refusal or no TLS server at all: it says both.
  testing::KeyPair client = testing::MakeLeaf(pki.ca, {"rank0", -1, 30});
  const std::string with_cert = testing::WriteTlsDir(
      testing::MakeTempDir("parity_diag_") + "/agent", pki.ca.cert_pem, {}, client);
  Peer closes_again(/*accept=*/true, [](int) {});
  EXPECT_THAT(DiagnoseTlsConnection("127.0.0.1", closes_again.port(), with_cert, "localhost", 300),
              AllOf(HasSubstr("closed the connection during the TLS handshake without saying why"),
                    HasSubstr("or it is not a Parity server")));
}

TEST(TlsDiagnoseTest, ATlsServerThatDoesNotSpeakHttp2IsNamed) {
  Pki pki;
  Peer tls(/*accept=*/true, [&](int fd) { ServeTls(pki, /*refuse_alpn=*/true, fd, 0); });
  EXPECT_THAT(Diagnose(pki, tls.port()), HasSubstr("does not speak gRPC (HTTP/2) on this port"));
}

TEST(TlsDiagnoseTest, ASilentPeerAfterTheHandshakeIsATimeout) {
  Pki pki;
  Peer tls(/*accept=*/true, [&](int fd) { ServeTls(pki, false, fd, /*linger_ms=*/5000); });
  EXPECT_THAT(Diagnose(pki, tls.port()),
              AllOf(HasSubstr("after the TLS handshake sent nothing for 300 ms"),
                    Not(HasSubstr("certificate"))));
}

TEST(TlsDiagnoseTest, AHangUpAfterTheHandshakeIsNamed) {
  Pki pki;
  Peer tls(/*accept=*/true, [&](int fd) { ServeTls(pki, false, fd, /*linger_ms=*/0); });
  EXPECT_THAT(Diagnose(pki, tls.port(), 2000),
              HasSubstr("closed the connection after the TLS handshake"));
}

}  // namespace
}  // namespace parity::common
