// How a mutual-TLS server judges the certificate a client presents: the chain against the
// server's ca.crt, its dates, its purpose, and crl.pem. The server's TLS asks every client for
// a certificate but lets the handshake finish whatever it shows; the Check stream then refuses a
// client whose certificate this rejects, with UNAUTHENTICATED and the reason, and counts it by
// cause with the peer's address (server/service/check_service.cc). Refused in the handshake, a
// client got UNAVAILABLE with no reason, and the server knew neither the peer nor the cause
// (issue 66). Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/transport/tls.h"

namespace parity::common {

// Why a client certificate is refused; each is a `cause` label of
// parity_server_tls_refusals_total.
enum class ClientCertificateCause {
  kAccepted,
  kNoCertificate,  // the client presented none
  kUnknownCa,      // not signed by (a chain up to) the server's ca.crt
  kExpired,        // past its notAfter
  kNotYetValid,    // before its notBefore
  kNotForClients,  // its extended key usage excludes TLS client authentication
  kRevoked,        // listed in crl.pem
  kUnverified,     // any other verification failure (malformed, bad signature, ...)
};
const char* ClientCertificateCauseName(ClientCertificateCause cause);  // "unknown_ca", ...
// Every refusal cause's name (not kAccepted), for metrics made at start-up.
std::vector<std::string> ClientCertificateRefusalNames();

struct ClientCertificateVerdict {
  ClientCertificateCause cause = ClientCertificateCause::kAccepted;
  std::string why;  // in words, for the client and the log: "expired on 2026-11-28 ..."
  bool accepted() const { return cause == ClientCertificateCause::kAccepted; }
};

class ClientCertificates {
 public:
  // `ca_pem`: ca.crt (one certificate or several); `crl`: crl.pem, or null.
  static absl::StatusOr<std::shared_ptr<const ClientCertificates>> Create(
      absl::string_view ca_pem, std::shared_ptr<const RevocationList> crl);
  ~ClientCertificates();
  // `leaf_pem`: the peer's certificate ("" when it showed none); `chain_pem`: the chain it sent
  // (the leaf first; may be empty).
  ClientCertificateVerdict Verify(absl::string_view leaf_pem, absl::string_view chain_pem) const;

  struct Impl;

 private:
  explicit ClientCertificates(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace parity::common
