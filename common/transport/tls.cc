#include "common/transport/tls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/config/config.h"
#include "common/transport/client_certificates.h"
#include "common/transport/net.h"
#include "common/transport/openssl_util.h"

namespace parity::common {
namespace {

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

struct CrlDeleter {
  void operator()(X509_CRL* c) const { X509_CRL_free(c); }
};

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

// The first line of `path`, the passphrase; warns when others may read the file.
absl::StatusOr<std::string> ReadPassphraseFile(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  const std::size_t end = text.find_first_of("\r\n");
  std::string line = text.substr(0, end);
  OPENSSL_cleanse(text.data(), text.size());
  std::error_code ec;
  const auto perms = std::filesystem::status(path, ec).permissions();
  if (!ec && (perms & (std::filesystem::perms::group_read | std::filesystem::perms::others_read)) !=
                 std::filesystem::perms::none) {
    LogWarning(absl::StrCat(path, ": the key password file is readable by others (chmod 600 it)"));
  }
  return line;
}

}  // namespace

struct RevocationList::Impl {
  std::unique_ptr<X509_CRL, CrlDeleter> crl;
  std::string path;
};

absl::StatusOr<std::shared_ptr<const RevocationList>> RevocationList::Load(
    const std::string& tls_path, absl::string_view ca_pem) {
  if (!Exists(tls_path, kCrlFile)) return std::shared_ptr<const RevocationList>();
  const std::string path = absl::StrCat(tls_path, "/", kCrlFile);
  PARITY_ASSIGN_OR_RETURN(std::string pem, ReadPem(tls_path, kCrlFile));
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  BioPtr bio = MemBio(pem);
  impl->crl.reset(PEM_read_bio_X509_CRL(bio.get(), nullptr, nullptr, nullptr));
  if (!impl->crl) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a PEM certificate revocation list (", OpenSslError(), ")"));
  }
  PARITY_ASSIGN_OR_RETURN(X509Ptr ca,
                          ParseCertificate(ca_pem, absl::StrCat(tls_path, "/", kCaFile)));
  if (X509_NAME_cmp(X509_CRL_get_issuer(impl->crl.get()), X509_get_subject_name(ca.get())) != 0 ||
      X509_CRL_verify(impl->crl.get(), X509_get0_pubkey(ca.get())) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not issued and signed by the CA of ", kCaFile));
  }
  const ASN1_TIME* this_update = X509_CRL_get0_lastUpdate(impl->crl.get());
  const ASN1_TIME* next_update = X509_CRL_get0_nextUpdate(impl->crl.get());
  if (this_update != nullptr && X509_cmp_current_time(this_update) >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not valid before ", TimeText(this_update)));
  }
  if (next_update != nullptr && X509_cmp_current_time(next_update) <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": out of date since ", TimeText(next_update),
                     " (its nextUpdate): issue a current one with the CA (openssl ca -gencrl)"));
  }
  const STACK_OF(X509_REVOKED)* revoked = X509_CRL_get_REVOKED(impl->crl.get());
  std::string description =
      absl::StrCat(path, " (", revoked != nullptr ? sk_X509_REVOKED_num(revoked) : 0, " revoked",
                   next_update != nullptr ? absl::StrCat(", next update ", TimeText(next_update))
                                          : std::string(),
                   ")");
  return std::shared_ptr<const RevocationList>(
      std::make_shared<RevocationList>(std::move(impl), std::move(description)));
}

std::string RevocationList::Revoked(absl::string_view cert_pem) const {
  BioPtr bio = MemBio(cert_pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return "";
  }
  X509_REVOKED* entry = nullptr;
  if (X509_CRL_get0_by_cert(impl_->crl.get(), &entry, cert.get()) != 1 || entry == nullptr) {
    return "";
  }
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr);
  char* hex = bn != nullptr ? BN_bn2hex(bn) : nullptr;
  const std::string serial = hex != nullptr ? hex : "?";
  OPENSSL_free(hex);
  BN_free(bn);
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof(subject));
  return absl::StrCat("certificate ", subject, " (serial 0x", serial, ") was revoked on ",
                      TimeText(X509_REVOKED_get0_revocationDate(entry)), " by ", impl_->path);
}

absl::StatusOr<std::string> ReadPrivateKey(const std::string& path,
                                           const std::string& password_file) {
  PARITY_ASSIGN_OR_RETURN(std::string pem, ReadFile(path));
  if (pem.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  if (!absl::StrContains(pem, "ENCRYPTED")) return pem;
  std::string passphrase;
  std::string source;
  if (!password_file.empty()) {
    PARITY_ASSIGN_OR_RETURN(passphrase, ReadPassphraseFile(password_file));
    source = absl::StrCat("the key password file ", password_file);
  } else if (const char* env = std::getenv(std::string(kKeyPasswordEnv).c_str())) {
    passphrase = env;
    source = absl::StrCat("$", kKeyPasswordEnv);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the private key is passphrase-protected: give its passphrase in $",
                     kKeyPasswordEnv, " or in a file named by parity.tls_key_password_file"));
  }
  BioPtr bio = MemBio(pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, passphrase.data()));
  OPENSSL_cleanse(passphrase.data(), passphrase.size());
  if (!key) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the passphrase from ", source, " does not decrypt the private key"));
  }
  BioPtr out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PKCS8PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
      1) {
    return absl::InternalError(
        absl::StrCat(path, ": cannot re-encode the key (", OpenSslError(), ")"));
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

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
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
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

absl::StatusOr<ServerTls> LoadServerTls(const std::string& tls_path,
                                        const std::string& key_password_file) {
  PARITY_RETURN_IF_ERROR(CheckDir(tls_path));
  PARITY_ASSIGN_OR_RETURN(std::string cert, ReadPem(tls_path, kServerCertFile));
  PARITY_ASSIGN_OR_RETURN(
      std::string key,
      ReadPrivateKey(absl::StrCat(tls_path, "/", kServerKeyFile), key_password_file));
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
    options.pem_root_certs = ca;  // the CAs the handshake names to the client
    // Mutual TLS: a client without a certificate signed by the CA never gets a stream. The
    // handshake asks for the certificate and lets it finish; the Check stream verifies it
    // (ClientCertificates) and refuses the client with the reason, counted by cause with its
    // address: a handshake refusal told neither side why, nor the server who.
    options.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY;
    out.mutual = true;
    out.description =
        absl::StrCat("mutual TLS: ", described, "; clients verified by ", ca_described);
    PARITY_ASSIGN_OR_RETURN(out.crl, RevocationList::Load(tls_path, ca));
    if (out.crl)
      absl::StrAppend(&out.description, "; revoked clients listed in ", out.crl->description());
    PARITY_ASSIGN_OR_RETURN(out.clients, ClientCertificates::Create(ca, out.crl));
  } else {
    if (Exists(tls_path, kCrlFile)) {
      return absl::InvalidArgumentError(absl::StrCat(
          tls_path, "/", kCrlFile, " revokes client certificates, but without ", kCaFile,
          " clients present none: add ", kCaFile, " (mutual TLS) or remove ", kCrlFile));
    }
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    out.description = absl::StrCat("TLS (no ", kCaFile, ": clients are not verified): ", described);
  }
  out.credentials = grpc::SslServerCredentials(options);
  return out;
}

absl::StatusOr<ChannelTls> LoadChannelTls(const std::string& tls_path,
                                          const std::string& key_password_file) {
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
    PARITY_ASSIGN_OR_RETURN(
        std::string key,
        ReadPrivateKey(absl::StrCat(tls_path, "/", kClientKeyFile), key_password_file));
    PARITY_ASSIGN_OR_RETURN(
        std::string described,
        CheckCertificatePem(cert, absl::StrCat(tls_path, "/", kClientCertFile)));
    PARITY_RETURN_IF_ERROR(
        CheckKeyMatchesCertificate(cert, key, absl::StrCat(tls_path, "/", kClientKeyFile)));
    options.pem_cert_chain = cert;
    options.pem_private_key = key;
    out.client_key_pem = key;
    out.client_certificate = true;
    out.description =
        absl::StrCat("mutual TLS as ", described, "; server verified by ", ca_described);
  }
  PARITY_ASSIGN_OR_RETURN(out.crl, RevocationList::Load(tls_path, ca));
  if (out.crl)
    absl::StrAppend(&out.description, "; revoked servers listed in ", out.crl->description());
  out.credentials = grpc::SslCredentials(options);
  return out;
}

}  // namespace parity::common
