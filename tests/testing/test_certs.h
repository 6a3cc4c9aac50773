// Throw-away certificates for tests, made with OpenSSL at test set-up (never committed).
#pragma once

#include <string>
#include <vector>

namespace parity::testing {

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct CertOptions {
  std::string common_name = "localhost";
  int valid_from_days = -1;  // relative to now
  int valid_to_days = 30;    // negative: already expired
  std::string extended_key_usage = "serverAuth,clientAuth";
};

// A self-signed CA.
KeyPair MakeCa(const std::string& common_name);

// A leaf certificate signed by `ca`, with subjectAltName DNS:localhost and IP:127.0.0.1.
KeyPair MakeLeaf(const KeyPair& ca, const CertOptions& options);

// Writes a tls_path directory: ca.crt (if `ca` non-empty), server.crt/.key, client.crt/.key
// (each pair if non-empty). Returns the directory.
std::string WriteTlsDir(const std::string& dir, const std::string& ca_cert, const KeyPair& server,
                        const KeyPair& client);

// `key_pem` encrypted with `passphrase` (AES-256, PKCS#8), as `openssl genrsa -aes256` users
// have them.
std::string EncryptKey(const std::string& key_pem, const std::string& passphrase);

// A CRL signed by `ca` revoking `revoked` (certificate PEMs), valid from yesterday until
// `next_update_days` from now (negative: already out of date).
std::string MakeCrl(const KeyPair& ca, const std::vector<std::string>& revoked,
                    int next_update_days = 30);

// A fresh empty directory under the test's temp dir.
std::string MakeTempDir(const std::string& prefix);

}  // namespace parity::testing
