#include "common/transport/client_certificates.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "common/transport/openssl_util.h"

namespace parity::common {

namespace {

struct StoreDeleter {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxDeleter {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackDeleter {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};

// Every certificate of a PEM text, in order.
std::vector<X509Ptr> ReadAll(absl::string_view pem) {
  std::vector<X509Ptr> out;
  if (pem.empty()) return out;
  BioPtr bio = MemBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    out.emplace_back(x);
  }
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

std::string Subject(X509* x) {
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(x), buf, sizeof(buf));
  return buf;
}

}  // namespace

struct ClientCertificates::Impl {
  std::unique_ptr<X509_STORE, StoreDeleter> store;
  std::shared_ptr<const RevocationList> crl;
};

const char* ClientCertificateCauseName(ClientCertificateCause cause) {
  switch (cause) {
    case ClientCertificateCause::kAccepted:
      return "accepted";
    case ClientCertificateCause::kNoCertificate:
      return "no_client_certificate";
    case ClientCertificateCause::kUnknownCa:
      return "unknown_ca";
    case ClientCertificateCause::kExpired:
      return "expired";
    case ClientCertificateCause::kNotYetValid:
      return "not_yet_valid";
    case ClientCertificateCause::kNotForClients:
      return "not_a_client_certificate";
    case ClientCertificateCause::kRevoked:
      return "revoked";
    case ClientCertificateCause::kUnverified:
      return "unverified";
  }
  return "unverified";
}

std::vector<std::string> ClientCertificateRefusalNames() {
  std::vector<std::string> out;
  for (int c = static_cast<int>(ClientCertificateCause::kNoCertificate);
       c <= static_cast<int>(ClientCertificateCause::kUnverified); ++c) {
    out.emplace_back(ClientCertificateCauseName(static_cast<ClientCertificateCause>(c)));
  }
  return out;
}

ClientCertificates::ClientCertificates(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClientCertificates::~ClientCertificates() = default;

absl::StatusOr<std::shared_ptr<const ClientCertificates>> ClientCertificates::Create(
    absl::string_view ca_pem, std::shared_ptr<const RevocationList> crl) {
  auto impl = std::make_unique<Impl>();
  impl->store.reset(X509_STORE_new());
  impl->crl = std::move(crl);
  std::vector<X509Ptr> cas = ReadAll(ca_pem);
  if (cas.empty()) return absl::InvalidArgumentError("ca.crt holds no PEM certificate");
  for (X509Ptr& ca : cas) {
    if (X509_STORE_add_cert(impl->store.get(), ca.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError("ca.crt: a certificate OpenSSL cannot add to its store");
    }
  }
  return std::shared_ptr<const ClientCertificates>(new ClientCertificates(std::move(impl)));
}

ClientCertificateVerdict ClientCertificates::Verify(absl::string_view leaf_pem,
                                                    absl::string_view chain_pem) const {
  using Cause = ClientCertificateCause;
  if (leaf_pem.empty()) {
    return {Cause::kNoCertificate,
            "no client certificate: this server requires one signed by its ca.crt (mutual TLS): "
            "put client.crt and client.key in the agent's tls_path"};
  }
  std::vector<X509Ptr> leaf = ReadAll(leaf_pem);
  if (leaf.empty()) return {Cause::kUnverified, "the client certificate is not PEM"};
  std::unique_ptr<STACK_OF(X509), StackDeleter> untrusted(sk_X509_new_null());
  for (X509Ptr& x : ReadAll(chain_pem)) {
    if (X509_cmp(x.get(), leaf.front().get()) == 0) continue;  // the leaf itself
    sk_X509_push(untrusted.get(), x.release());
  }
  std::unique_ptr<X509_STORE_CTX, StoreCtxDeleter> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), impl_->store.get(), leaf.front().get(),
                                  untrusted.get()) != 1) {
    ERR_clear_error();
    return {Cause::kUnverified, "the server could not set up the verification"};
  }
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_CLIENT);
  const std::string subject = Subject(leaf.front().get());
  if (X509_verify_cert(ctx.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    const std::string what =
        absl::StrCat("client certificate ", subject, ": ", X509_verify_cert_error_string(error));
    switch (error) {
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return {Cause::kExpired, absl::StrCat(what, ": renew it")};
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return {Cause::kNotYetValid, absl::StrCat(what, " (the client's or the server's clock?)")};
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        return {Cause::kUnknownCa,
                absl::StrCat(what, ": it is not signed by the CA this server trusts (its ca.crt)")};
      case X509_V_ERR_INVALID_PURPOSE:
        return {Cause::kNotForClients,
                absl::StrCat(what,
                             ": its extended key usage does not allow client "
                             "authentication")};
      default:
        return {Cause::kUnverified, what};
    }
  }
  if (impl_->crl) {
    const std::string revoked = impl_->crl->Revoked(leaf_pem);
    if (!revoked.empty()) return {Cause::kRevoked, absl::StrCat("client ", revoked)};
  }
  return {};
}

}  // namespace parity::common
