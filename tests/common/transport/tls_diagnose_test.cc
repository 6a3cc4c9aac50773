// common::DiagnoseTlsConnection against real sockets that misbehave in each way a user meets:
// a peer that accepts TCP and never answers (a SIGSTOPped or wedged server), one that hangs up,
// a TLS peer that refuses the agent's ALPN (not gRPC), one that completes the handshake and then
// says nothing, and one that hangs up right after it. Each must be named for what it is, and
// never blamed on the agent's certificate. (tests/server/app/server_test.cc covers the diagnoses
// against a real parity-server: refused and untrusted certificates, wrong name, plaintext.)

#include "common/transport/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_certs.h"
#include "tests/testing/tls_peer.h"

namespace parity::common {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::LoopbackPeer;
using testing::ServeTls;
using Pki = testing::TlsPeerPki;

std::string Diagnose(const Pki& pki, int port, int timeout_ms = 300) {
  return DiagnoseTlsConnection("127.0.0.1", port, pki.agent_dir, "localhost", timeout_ms);
}

TEST(TlsDiagnoseTest, AServerThatNeverAnswersTheHandshakeIsATimeout) {
  Pki pki;
  LoopbackPeer hung(/*accept=*/false,
                    nullptr);  // a stopped server: TCP accepted by the kernel only
  EXPECT_THAT(Diagnose(pki, hung.port()),
              AllOf(HasSubstr("accepted the TCP connection but did not complete the TLS "
                              "handshake within 300 ms"),
                    HasSubstr("hung"), Not(HasSubstr("certificate"))));
}

TEST(TlsDiagnoseTest, APeerThatHangsUpIsNotBlamedOnTheCertificateItNeverSaw) {
  Pki pki;
  LoopbackPeer closes(/*accept=*/true, [](int, int) {});
  // No client certificate here: "closed" reads as "requires one" (the TLS 1.2 way to refuse).
  EXPECT_THAT(Diagnose(pki, closes.port()), HasSubstr("requires a client certificate"));
  // With one, a silent hang-up may be a refusal or no TLS server at all: it says both.
  testing::KeyPair client = testing::MakeLeaf(pki.ca, {"rank0", -1, 30});
  const std::string with_cert = testing::WriteTlsDir(
      testing::MakeTempDir("parity_diag_") + "/agent", pki.ca.cert_pem, {}, client);
  LoopbackPeer closes_again(/*accept=*/true, [](int, int) {});
  EXPECT_THAT(DiagnoseTlsConnection("127.0.0.1", closes_again.port(), with_cert, "localhost", 300),
              AllOf(HasSubstr("closed the connection during the TLS handshake without saying why"),
                    HasSubstr("or it is not a Parity server")));
}

TEST(TlsDiagnoseTest, ATlsServerThatDoesNotSpeakHttp2IsNamed) {
  Pki pki;
  LoopbackPeer tls(/*accept=*/true,
                   [&](int fd, int) { ServeTls(pki, /*refuse_alpn=*/true, fd, 0); });
  EXPECT_THAT(Diagnose(pki, tls.port()), HasSubstr("does not speak gRPC (HTTP/2) on this port"));
}

TEST(TlsDiagnoseTest, ASilentPeerAfterTheHandshakeIsATimeout) {
  Pki pki;
  LoopbackPeer tls(/*accept=*/true,
                   [&](int fd, int) { ServeTls(pki, false, fd, /*linger_ms=*/5000); });
  EXPECT_THAT(Diagnose(pki, tls.port()),
              AllOf(HasSubstr("after the TLS handshake sent nothing for 300 ms"),
                    Not(HasSubstr("certificate"))));
}

TEST(TlsDiagnoseTest, AHangUpAfterTheHandshakeIsNamed) {
  Pki pki;
  LoopbackPeer tls(/*accept=*/true,
                   [&](int fd, int) { ServeTls(pki, false, fd, /*linger_ms=*/0); });
  EXPECT_THAT(Diagnose(pki, tls.port(), 2000),
              HasSubstr("closed the connection after the TLS handshake"));
}

}  // namespace
}  // namespace parity::common
