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
#include "common/transport/net.h"

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

// For keys that must not be encrypted here: OpenSSL's default would prompt on the terminal.
int NoPassphrase(char*, int, int, void*) { return -1; }

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
    options.pem_root_certs = ca;
    // Mutual TLS: a client without a certificate signed by the CA never gets a stream.
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    out.mutual = true;
    out.description =
        absl::StrCat("mutual TLS: ", described, "; clients verified by ", ca_described);
    PARITY_ASSIGN_OR_RETURN(out.crl, RevocationList::Load(tls_path, ca));
    if (out.crl)
      absl::StrAppend(&out.description, "; revoked clients listed in ", out.crl->description());
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

namespace {

struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslDeleter {
  void operator()(SSL* s) const { SSL_free(s); }
};

// The TLS alert or library error behind a failed SSL call, as OpenSSL names it.
std::string SslFailure() {
  unsigned long code = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return "the connection was closed during the handshake";
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : "unknown TLS error";
}

// Blocks SIGPIPE on this thread for its lifetime and discards one raised meanwhile. OpenSSL's
// socket BIO writes with write(2), and a write to a peer that hung up raises SIGPIPE, whose
// default action ends the process: a libtorch program training with the agent must not die
// because a diagnosis wrote to a closed server. (gRPC's own sends use MSG_NOSIGNAL.)
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);  // ours: consume it before unblocking
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// Whether SSL_connect/SSL_read returning `rc` gave up because the socket's receive timeout
// (SO_RCVTIMEO, set by ConnectTcp) expired: the peer said nothing, rather than something bad.
bool TimedOut(SSL* ssl, int rc) {
  const int e = errno;
  const int err = SSL_get_error(ssl, rc);
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ||
         (err == SSL_ERROR_SYSCALL && (e == EAGAIN || e == EWOULDBLOCK));
}

std::string ExplainAlert(const std::string& reason, const std::string& tls_path,
                         bool client_certificate) {
  const std::string where = absl::StrCat(" (", reason, ")");
  const bool closed = absl::StrContains(reason, "unexpected eof") ||
                      absl::StrContains(reason, "closed during the handshake");
  if (absl::StrContains(reason, "certificate required") || (closed && !client_certificate)) {
    return absl::StrCat("the server requires a client certificate (mutual TLS): put ",
                        kClientCertFile, " and ", kClientKeyFile, ", signed by the server's ",
                        kCaFile, ", in ", tls_path, where);
  }
  if (closed) {
    // No alert, just the end of the connection: a TLS server refusing a certificate says so.
    return absl::StrCat(
        "the server closed the connection during the TLS handshake without saying why: it may "
        "have refused this agent's client certificate ",
        tls_path, "/", kClientCertFile,
        " (not signed by the CA it trusts, or expired), or it is "
        "not a Parity server",
        where);
  }
  if (absl::StrContains(reason, "unknown ca") || absl::StrContains(reason, "bad certificate") ||
      absl::StrContains(reason, "certificate unknown") ||
      absl::StrContains(reason, "decrypt error")) {
    return absl::StrCat("the server refused this agent's client certificate ", tls_path, "/",
                        kClientCertFile, ": it is not signed by the CA the server trusts (its ",
                        kCaFile, "), or it has expired", where);
  }
  if (absl::StrContains(reason, "certificate expired")) {
    return absl::StrCat("the server refused this agent's client certificate as expired", where);
  }
  if (absl::StrContains(reason, "no application protocol")) {
    return absl::StrCat("the server does not speak gRPC (HTTP/2) on this port", where);
  }
  if (absl::StrContains(reason, "wrong version number") ||
      absl::StrContains(reason, "packet length too long")) {
    return absl::StrCat(
        "the server does not speak TLS on this port: is it running with "
        "--plaintext? (then set parity.plaintext in the agent too)",
        where);
  }
  return absl::StrCat("TLS handshake failed", client_certificate ? "" : " (no client certificate)",
                      where);
}

}  // namespace

// The names a certificate carries: its subjectAltName DNS and IP entries, else its CN.
static std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
      if (n->type == GEN_DNS) {
        const ASN1_STRING* s = n->d.dNSName;
        names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                           static_cast<std::size_t>(ASN1_STRING_length(s)));
      } else if (n->type == GEN_IPADD && n->d.iPAddress->length == 4) {
        const unsigned char* a = ASN1_STRING_get0_data(n->d.iPAddress);
        names.push_back(absl::StrCat(a[0], ".", a[1], ".", a[2], ".", a[3]));
      }
    }
    GENERAL_NAMES_free(sans);
  }
  if (names.empty()) {
    X509_NAME* subject = X509_get_subject_name(cert);
    const int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (i >= 0) {
      const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)),
                         static_cast<std::size_t>(ASN1_STRING_length(cn)));
    }
  }
  return names;
}

std::string DiagnoseTlsConnection(const std::string& host, int port, const std::string& tls_path,
                                  const std::string& server_name, int timeout_ms,
                                  const std::string& key_password_file) {
  auto material = LoadChannelTls(tls_path, key_password_file);
  if (!material.ok()) return std::string(material.status().message());
  std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return "cannot create a TLS context";
  const std::string ca = absl::StrCat(tls_path, "/", kCaFile);
  if (SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr) != 1) {
    return absl::StrCat(ca, ": ", SslFailure());
  }
  // The server certificate's names, kept as the chain is verified: a failed handshake keeps no
  // peer certificate, and a name mismatch is explained with both names.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, [](int ok, X509_STORE_CTX* store) {
    SSL* s =
        static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    auto* names =
        s != nullptr ? static_cast<std::vector<std::string>*>(SSL_get_app_data(s)) : nullptr;
    X509* cert = X509_STORE_CTX_get_current_cert(store);
    if (names != nullptr && names->empty() && cert != nullptr &&
        X509_STORE_CTX_get_error_depth(store) == 0) {
      *names = CertificateNames(cert);
    }
    return ok;
  });
  if (material->client_certificate) {
    const std::string cert = absl::StrCat(tls_path, "/", kClientCertFile);
    BioPtr key_bio = MemBio(material->client_key_pem);  // decrypted: never a terminal prompt
    KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
    if (!key || SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1) {
      return absl::StrCat(cert, ": ", SslFailure());
    }
  }
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));

  const ScopedNoSigpipe no_sigpipe;
  std::string error;
  const int fd = ConnectTcp(host, port, timeout_ms, &error);
  if (fd < 0) return error;
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  std::vector<std::string> leaf_names;  // filled by the verify callback above
  SSL_set_app_data(ssl.get(), &leaf_names);
  const std::string name = server_name.empty() ? host : server_name;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    SSL_set_tlsext_host_name(ssl.get(), name.c_str());
  }
  ERR_clear_error();
  std::string result;
  const std::string silent =
      absl::StrCat("the server at ", host, ":", port, " accepted the TCP connection but ");
  const int connected = SSL_connect(ssl.get());
  if (connected != 1 && TimedOut(ssl.get(), connected)) {
    result = absl::StrCat(silent, "did not complete the TLS handshake within ", timeout_ms,
                          " ms: it is hung (stopped, overloaded), or not a Parity server");
  } else if (connected != 1) {
    const long verify = SSL_get_verify_result(ssl.get());  // NOLINT(runtime/int)
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      // Both names: the one dialled, and the ones the certificate carries (msprobe's recipe
      // makes certificates with only a CN, "*example.com", and no subjectAltName).
      const std::vector<std::string>& names = leaf_names;
      const std::string carried = names.empty()
                                      ? std::string("other names")
                                      : absl::StrCat("\"", absl::StrJoin(names, "\", \""), "\"");
      result = absl::StrCat(
          "the server's certificate names ", carried, ", not \"", name,
          "\": set parity.server_name to ", names.empty() ? "a name it carries" : carried,
          names.size() > 1 ? " (one of them)" : "", " (the agent still dials ", host,
          "), or reissue it for \"", name, "\" (deploy/gen-certs.sh OUT DAYS ", name, ")");
    } else if (verify != X509_V_OK) {
      result = absl::StrCat(
          "the server's certificate is not trusted: ", X509_verify_cert_error_string(verify),
          "; is ", ca, " the CA that signed the server's certificate?");
    } else {
      result = ExplainAlert(SslFailure(), tls_path, material->client_certificate);
    }
  } else {
    // TLS 1.3 sends the server's verdict on the client certificate after the handshake: read
    // until the server speaks (its HTTP/2 settings) or alerts.
    char buf[64];
    const int n = SSL_read(ssl.get(), buf, sizeof(buf));
    if (n <= 0 && SSL_get_error(ssl.get(), n) == SSL_ERROR_SSL) {
      result = ExplainAlert(SslFailure(), tls_path, material->client_certificate);
    } else if (n <= 0 && TimedOut(ssl.get(), n)) {
      // A gRPC server speaks first after the handshake (its HTTP/2 settings).
      result = absl::StrCat(silent, "after the TLS handshake sent nothing for ", timeout_ms,
                            " ms (a gRPC server sends its HTTP/2 settings at once): it is hung, "
                            "or not a Parity server");
    } else if (n <= 0 && SSL_get_error(ssl.get(), n) == SSL_ERROR_ZERO_RETURN) {
      result = absl::StrCat(silent,
                            "closed the connection after the TLS handshake: it is not a "
                            "Parity server, or it refused this agent");
    }
  }
  ERR_clear_error();
  close(fd);
  return result;
}

}  // namespace parity::common
