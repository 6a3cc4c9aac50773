// DiagnoseTlsConnection (common/transport/tls.h): one TLS handshake made by hand with OpenSSL, so
// that a failed connection is explained in the words of what went wrong.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/transport/net.h"
#include "common/transport/openssl_util.h"
#include "common/transport/tls.h"

namespace parity::common {
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

namespace {

using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;

// A client context that trusts `tls_path`'s CA, shows the client certificate when there is one,
// offers HTTP/2, and keeps the server certificate's names as the chain is verified (a failed
// handshake keeps no peer certificate; a name mismatch is explained with both names). Null with
// the reason in `error`.
SslCtxPtr ClientContext(const ChannelTls& material, const std::string& tls_path,
                        std::string* error) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    *error = "cannot create a TLS context";
    return nullptr;
  }
  const std::string ca = absl::StrCat(tls_path, "/", kCaFile);
  if (SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr) != 1) {
    *error = absl::StrCat(ca, ": ", SslFailure());
    return nullptr;
  }
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
  if (material.client_certificate) {
    const std::string cert = absl::StrCat(tls_path, "/", kClientCertFile);
    BioPtr key_bio = MemBio(material.client_key_pem);  // decrypted: never a terminal prompt
    KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
    if (!key || SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1) {
      *error = absl::StrCat(cert, ": ", SslFailure());
      return nullptr;
    }
  }
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));
  return ctx;
}

// What a handshake that failed (not by timing out) says: a name the certificate does not carry,
// a certificate not signed by the CA, or the server's alert.
std::string ExplainFailedHandshake(SSL* ssl, const std::vector<std::string>& names,
                                   const std::string& name, const std::string& host,
                                   const std::string& tls_path, bool client_certificate) {
  const long verify = SSL_get_verify_result(ssl);  // NOLINT(runtime/int)
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    // Both names: the one dialled, and the ones the certificate carries (msprobe's recipe
    // makes certificates with only a CN, "*example.com", and no subjectAltName).
    const std::string carried = names.empty()
                                    ? std::string("other names")
                                    : absl::StrCat("\"", absl::StrJoin(names, "\", \""), "\"");
    return absl::StrCat(
        "the server's certificate names ", carried, ", not \"", name,
        "\": set parity.server_name to ", names.empty() ? "a name it carries" : carried,
        names.size() > 1 ? " (one of them)" : "", " (the agent still dials ", host,
        "), or reissue it for \"", name, "\" (deploy/gen-certs.sh OUT DAYS ", name, ")");
  }
  if (verify != X509_V_OK) {
    return absl::StrCat(
        "the server's certificate is not trusted: ", X509_verify_cert_error_string(verify), "; is ",
        tls_path, "/", kCaFile, " the CA that signed the server's certificate?");
  }
  return ExplainAlert(SslFailure(), tls_path, client_certificate);
}

// After a completed handshake: TLS 1.3 sends the server's verdict on the client certificate
// after it, so read until the server speaks (its HTTP/2 settings) or alerts. Empty when it spoke.
std::string ExplainAfterHandshake(SSL* ssl, const std::string& silent, int timeout_ms,
                                  const std::string& tls_path, bool client_certificate) {
  char buf[64];
  const int n = SSL_read(ssl, buf, sizeof(buf));
  if (n > 0) return "";
  if (SSL_get_error(ssl, n) == SSL_ERROR_SSL) {
    return ExplainAlert(SslFailure(), tls_path, client_certificate);
  }
  if (TimedOut(ssl, n)) {
    // A gRPC server speaks first after the handshake (its HTTP/2 settings).
    return absl::StrCat(silent, "after the TLS handshake sent nothing for ", timeout_ms,
                        " ms (a gRPC server sends its HTTP/2 settings at once): it is hung, "
                        "or not a Parity server");
  }
  if (SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN) {
    return absl::StrCat(silent,
                        "closed the connection after the TLS handshake: it is not a "
                        "Parity server, or it refused this agent");
  }
  return "";
}

}  // namespace

std::string DiagnoseTlsConnection(const std::string& host, int port, const std::string& tls_path,
                                  const std::string& server_name, int timeout_ms,
                                  const std::string& key_password_file) {
  auto material = LoadChannelTls(tls_path, key_password_file);
  if (!material.ok()) return std::string(material.status().message());
  std::string error;
  SslCtxPtr ctx = ClientContext(*material, tls_path, &error);
  if (!ctx) return error;
  const ScopedNoSigpipe no_sigpipe;
  const int fd = ConnectTcp(host, port, timeout_ms, &error);
  if (fd < 0) return error;
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  std::vector<std::string> leaf_names;  // filled by the context's verify callback
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
    result = ExplainFailedHandshake(ssl.get(), leaf_names, name, host, tls_path,
                                    material->client_certificate);
  } else {
    result = ExplainAfterHandshake(ssl.get(), silent, timeout_ms, tls_path,
                                   material->client_certificate);
  }
  ERR_clear_error();
  close(fd);
  return result;
}

}  // namespace parity::common
