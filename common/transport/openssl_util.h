// OpenSSL objects owned by unique_ptrs, shared by the TLS loader (tls.cc) and the connection
// diagnosis (tls_diagnose.cc). Internal to common/transport.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/string_view.h"

namespace parity::common {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

inline BioPtr MemBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// For keys that must not be encrypted here: OpenSSL's default would prompt on the terminal.
inline int NoPassphrase(char*, int, int, void*) { return -1; }

}  // namespace parity::common
