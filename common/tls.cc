#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace parity::common {
namespace {

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

BioPtr MemBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string OpenSslError() {
  unsigned long code = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return "no PEM block found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

std::string TimeText(const ASN1_TIME* t) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<X509Ptr> ParseCertificate(absl::string_view pem, absl::string_view what) {
  BioPtr bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a PEM certificate (", OpenSslError(), ")"));
  }
  return cert;
}

absl::StatusOr<std::string> ReadPem(const std::string& dir, absl::string_view name) {
  const std::string path = (std::filesystem::path(dir) / std::string(name)).string();
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (text->empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  return text;
}

bool Exists(const std::string& dir, absl::string_view name) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir) / std::string(name), ec);
}

absl::Status CheckDir(const std::string& tls_path) {
  if (tls_path.empty()) {
    return absl::InvalidArgumentError(
        "tls_path is empty: TLS needs a directory with certificates (plaintext must be asked "
        "for explicitly with parity.plaintext: true)");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(tls_path, ec)) {
    return absl::NotFoundError(absl::StrCat("tls_path ", tls_path, ": not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> CheckCertificatePem(absl::string_view pem, absl::string_view what) {
  PARITY_ASSIGN_OR_RETURN(X509Ptr cert, ParseCertificate(pem, what));
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  if (X509_cmp_current_time(not_after) <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": certificate expired on ", TimeText(not_after)));
  }
  if (X509_cmp_current_time(not_before) >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": certificate not valid before ", TimeText(not_before)));
  }
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof(subject));
  return absl::StrCat(what, " (", subject, ", expires ", TimeText(not_after), ")");
}

absl::Status CheckKeyMatchesCertificate(absl::string_view cert_pem, absl::string_view key_pem,
                                        absl::string_view what) {
  PARITY_ASSIGN_OR_RETURN(X509Ptr cert, ParseCertificate(cert_pem, what));
  BioPtr bio = MemBio(key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": key is not a PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the private key does not belong to the certificate"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerTls> LoadServerTls(const std::string& tls_path) {
  PARITY_RETURN_IF_ERROR(CheckDir(tls_path));
  PARITY_ASSIGN_OR_RETURN(std::string cert, ReadPem(tls_path, kServerCertFile));
  PARITY_ASSIGN_OR_RETURN(std::string key, ReadPem(tls_path, kServerKeyFile));
  PARITY_ASSIGN_OR_RETURN(std::string described,
                          CheckCertificatePem(cert, absl::StrCat(tls_path, "/", kServerCertFile)));
  PARITY_RETURN_IF_ERROR(
      CheckKeyMatchesCertificate(cert, key, absl::StrCat(tls_path, "/", kServerKeyFile)));

  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({key, cert});
  ServerTls out;
  if (Exists(tls_path, kCaFile)) {
    PARITY_ASSIGN_OR_RETURN(std::string ca, ReadPem(tls_path, kCaFile));
    PARITY_ASSIGN_OR_RETURN(std::string ca_described,
                            CheckCertificatePem(ca, absl::StrCat(tls_path, "/", kCaFile)));
    options.pem_root_certs = ca;
    // Mutual TLS: a client without a certificate signed by the CA never gets a stream.
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    out.mutual = true;
    out.description =
        absl::StrCat("mutual TLS: ", described, "; clients verified by ", ca_described);
  } else {
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    out.description = absl::StrCat("TLS (no ", kCaFile, ": clients are not verified): ", described);
  }
  out.credentials = grpc::SslServerCredentials(options);
  return out;
}

absl::StatusOr<ChannelTls> LoadChannelTls(const std::string& tls_path) {
  PARITY_RETURN_IF_ERROR(CheckDir(tls_path));
  PARITY_ASSIGN_OR_RETURN(std::string ca, ReadPem(tls_path, kCaFile));
  PARITY_ASSIGN_OR_RETURN(std::string ca_described,
                          CheckCertificatePem(ca, absl::StrCat(tls_path, "/", kCaFile)));
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca;
  ChannelTls out;
  out.description = absl::StrCat("TLS, server verified by ", ca_described);
  const bool has_cert = Exists(tls_path, kClientCertFile);
  const bool has_key = Exists(tls_path, kClientKeyFile);
  if (has_cert != has_key) {
    return absl::InvalidArgumentError(
        absl::StrCat(tls_path, ": ", has_cert ? kClientCertFile : kClientKeyFile, " found without ",
                     has_cert ? kClientKeyFile : kClientCertFile, " (mutual TLS needs both)"));
  }
  if (has_cert) {
    PARITY_ASSIGN_OR_RETURN(std::string cert, ReadPem(tls_path, kClientCertFile));
    PARITY_ASSIGN_OR_RETURN(std::string key, ReadPem(tls_path, kClientKeyFile));
    PARITY_ASSIGN_OR_RETURN(
        std::string described,
        CheckCertificatePem(cert, absl::StrCat(tls_path, "/", kClientCertFile)));
    PARITY_RETURN_IF_ERROR(
        CheckKeyMatchesCertificate(cert, key, absl::StrCat(tls_path, "/", kClientKeyFile)));
    options.pem_cert_chain = cert;
    options.pem_private_key = key;
    out.client_certificate = true;
    out.description =
        absl::StrCat("mutual TLS as ", described, "; server verified by ", ca_described);
  }
  out.credentials = grpc::SslCredentials(options);
  return out;
}

}  // namespace parity::common
