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

struct ServerTls {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  bool mutual = false;      // ca.crt present: clients must present a certificate signed by it
  std::string description;  // one line for the start-up log
};

// server.crt + server.key (required); ca.crt (optional) turns on mutual TLS.
// Errors name the file: NOT_FOUND, INVALID_ARGUMENT (not PEM, key does not match),
// FAILED_PRECONDITION (expired or not yet valid).
absl::StatusOr<ServerTls> LoadServerTls(const std::string& tls_path);

struct ChannelTls {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  bool client_certificate = false;  // client.crt + client.key were found (for mutual TLS)
  std::string description;
};

// ca.crt (required: the server is always verified); client.crt + client.key (optional, both or
// neither) for mutual TLS.
absl::StatusOr<ChannelTls> LoadChannelTls(const std::string& tls_path);

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
                                  const std::string& server_name, int timeout_ms);

}  // namespace parity::common
