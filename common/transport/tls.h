// TLS material for the gRPC server and the agent's channel, read from a `tls_path` directory with
// msprobe's file names. Every file is checked when it is loaded (readable, PEM, not expired, key
// matching its certificate) so that a bad certificate is a clear start-up error, never a silent
// fallback to plaintext or a handshake failure nobody can explain.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerCredentials;
class ChannelCredentials;
}  // namespace grpc

namespace parity::common {

// File names inside tls_path.
inline constexpr absl::string_view kServerCertFile = "server.crt";
inline constexpr absl::string_view kServerKeyFile = "server.key";
inline constexpr absl::string_view kClientCertFile = "client.crt";
inline constexpr absl::string_view kClientKeyFile = "client.key";
inline constexpr absl::string_view kCaFile = "ca.crt";
inline constexpr absl::string_view kCrlFile = "crl.pem";
// The environment variable a passphrase-protected private key's passphrase is read from when no
// key password file is configured. Passphrases never come from the command line or a log.
inline constexpr absl::string_view kKeyPasswordEnv = "PARITY_TLS_KEY_PASSWORD";

// A certificate revocation list (crl.pem in tls_path, as msprobe's docs describe): at load its
// signature is checked against ca.crt and it must be current (thisUpdate <= now <= nextUpdate).
// Thread-safe.
class RevocationList {
 public:
  // Null when tls_path holds no crl.pem. Errors name the file: INVALID_ARGUMENT (not a PEM CRL,
  // not signed by ca.crt), FAILED_PRECONDITION (not yet valid, or past its nextUpdate).
  static absl::StatusOr<std::shared_ptr<const RevocationList>> Load(const std::string& tls_path,
                                                                    absl::string_view ca_pem);
  // Why the certificate `cert_pem` (a peer's) is revoked: "certificate serial 0x1F (CN=...)
  // revoked on ... by .../crl.pem"; "" when it is not revoked (or is not a certificate).
  std::string Revoked(absl::string_view cert_pem) const;
  // "crl.pem (N revoked, next update ...)", for the start-up log.
  const std::string& description() const { return description_; }

  struct Impl;
  explicit RevocationList(std::shared_ptr<Impl> impl, std::string description)
      : impl_(std::move(impl)), description_(std::move(description)) {}

 private:
  std::shared_ptr<Impl> impl_;
  std::string description_;
};

// The PEM private key at `path`, decrypted when it is passphrase-protected (`openssl genrsa
// -aes256`, as msprobe's docs make them): the passphrase is the first line of `password_file`
// when one is named, else $PARITY_TLS_KEY_PASSWORD. INVALID_ARGUMENT naming the file and where
// the passphrase came from when it is missing or wrong; never prompts on a terminal.
absl::StatusOr<std::string> ReadPrivateKey(const std::string& path,
                                           const std::string& password_file);

class ClientCertificates;  // common/transport/client_certificates.h

struct ServerTls {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  bool mutual = false;      // ca.crt present: clients must present a certificate signed by it
  std::string description;  // one line for the start-up log
  // crl.pem: streams from a client whose certificate it revokes are refused (UNAUTHENTICATED).
  std::shared_ptr<const RevocationList> crl;
  // Mutual TLS: the handshake asks every client for a certificate and finishes whatever it
  // shows; the Check stream refuses one these reject, with the reason (crl.pem included).
  std::shared_ptr<const ClientCertificates> clients;
};

// server.crt + server.key (required; the key may be passphrase-protected: ReadPrivateKey);
// ca.crt (optional) turns on mutual TLS; crl.pem (optional, needs ca.crt) revokes clients.
// Errors name the file: NOT_FOUND, INVALID_ARGUMENT (not PEM, key does not match, passphrase
// missing or wrong), FAILED_PRECONDITION (expired or not yet valid).
absl::StatusOr<ServerTls> LoadServerTls(const std::string& tls_path,
                                        const std::string& key_password_file = "");

struct ChannelTls {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  bool client_certificate = false;  // client.crt + client.key were found (for mutual TLS)
  std::string client_key_pem;       // client.key, decrypted
  std::string description;
  // crl.pem: a server whose certificate it revokes is refused before any call is sent.
  std::shared_ptr<const RevocationList> crl;
};

// ca.crt (required: the server is always verified); client.crt + client.key (optional, both or
// neither; the key may be passphrase-protected) for mutual TLS; crl.pem (optional).
absl::StatusOr<ChannelTls> LoadChannelTls(const std::string& tls_path,
                                          const std::string& key_password_file = "");

// Checks one PEM certificate: parses, and is valid now. Returns "subject CN=..., expires ...".
absl::StatusOr<std::string> CheckCertificatePem(absl::string_view pem, absl::string_view what);

// Checks that `key_pem` is the private key of `cert_pem`.
absl::Status CheckKeyMatchesCertificate(absl::string_view cert_pem, absl::string_view key_pem,
                                        absl::string_view what);

// Why a TLS connection to host:port with this tls_path fails, in words a user can act on; ""
// when the handshake succeeds (the problem is elsewhere). Opens its own TCP connection and TLS
// handshake with OpenSSL using the same files, name and ALPN as the agent's channel, because
// gRPC reports every such failure only as "unavailable". For logs after a failed connection;
// blocks up to `timeout_ms`.
std::string DiagnoseTlsConnection(const std::string& host, int port, const std::string& tls_path,
                                  const std::string& server_name, int timeout_ms,
                                  const std::string& key_password_file = "");

}  // namespace parity::common
