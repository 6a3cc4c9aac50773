// How a mutual-TLS server judges a client certificate (common/transport/client_certificates.h):
// each cause of parity_server_tls_refusals_total from a certificate made to have it.
#include "common/transport/client_certificates.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_certs.h"

namespace parity::common {
namespace {

using ::testing::HasSubstr;
using Cause = ClientCertificateCause;

TEST(ClientCertificatesTest, EachCauseFromACertificateThatHasIt) {
  const testing::KeyPair ca = testing::MakeCa("Clients CA");
  const testing::KeyPair other_ca = testing::MakeCa("Some Other CA");
  const testing::KeyPair good = testing::MakeLeaf(ca, {"rank0", -1, 30});
  const testing::KeyPair revoked = testing::MakeLeaf(ca, {"stolen", -1, 30});
  const std::string dir =
      testing::WriteTlsDir(testing::MakeTempDir("parity_clients_"), ca.cert_pem, {}, {});
  {
    std::FILE* f = std::fopen((dir + "/crl.pem").c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string crl = testing::MakeCrl(ca, {revoked.cert_pem});
    std::fwrite(crl.data(), 1, crl.size(), f);
    std::fclose(f);
  }
  auto crl = RevocationList::Load(dir, ca.cert_pem);
  ASSERT_TRUE(crl.ok()) << crl.status();
  auto clients = ClientCertificates::Create(ca.cert_pem, *crl);
  ASSERT_TRUE(clients.ok()) << clients.status();
  const auto verdict = [&](const testing::KeyPair& leaf) {
    return (*clients)->Verify(leaf.cert_pem, leaf.cert_pem);
  };
  EXPECT_TRUE(verdict(good).accepted()) << verdict(good).why;
  // The chain a client sends may hold its leaf and intermediates: the leaf is not its own issuer.
  EXPECT_TRUE((*clients)->Verify(good.cert_pem, good.cert_pem + ca.cert_pem).accepted());
  const struct {
    Cause cause;
    testing::KeyPair leaf;
    const char* says;
  } refused[] = {
      {Cause::kUnknownCa, testing::MakeLeaf(other_ca, {"rank0", -1, 30}),
       "it is not signed by the CA this server trusts"},
      {Cause::kExpired, testing::MakeLeaf(ca, {"rank0", -10, -1}), "certificate has expired"},
      {Cause::kNotYetValid, testing::MakeLeaf(ca, {"rank0", 2, 30}), "not yet valid"},
      {Cause::kNotForClients, testing::MakeLeaf(ca, {"rank0", -1, 30, "serverAuth"}),
       "does not allow client authentication"},
      {Cause::kRevoked, revoked, "revoked"},
      {Cause::kUnknownCa, other_ca, "not signed by the CA this server trusts"},  // self-signed
  };
  for (const auto& r : refused) {
    SCOPED_TRACE(ClientCertificateCauseName(r.cause));
    const ClientCertificateVerdict v = verdict(r.leaf);
    EXPECT_EQ(v.cause, r.cause) << v.why;
    EXPECT_THAT(v.why, HasSubstr(r.says));
  }
  const ClientCertificateVerdict none = (*clients)->Verify("", "");
  EXPECT_EQ(none.cause, Cause::kNoCertificate);
  EXPECT_THAT(none.why, HasSubstr("put client.crt and client.key in the agent's tls_path"));
  EXPECT_EQ((*clients)->Verify("not a certificate", "").cause, Cause::kUnverified);
  // Every refusal cause has its metric label, and only those.
  EXPECT_EQ(
      ClientCertificateRefusalNames(),
      (std::vector<std::string>{"no_client_certificate", "unknown_ca", "expired", "not_yet_valid",
                                "not_a_client_certificate", "revoked", "unverified"}));
}

}  // namespace
}  // namespace parity::common
