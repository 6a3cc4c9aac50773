#include "tests/testing/tls_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace parity::testing {

LoopbackPeer::LoopbackPeer(bool accept, std::function<void(int, int)> behave)
    : behave_(std::move(behave)) {
  // A handler writing to a client that has gone (TLS's tickets after the handshake) gets EPIPE,
  // not a signal that ends the test program.
  ::signal(SIGPIPE, SIG_IGN);
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(fd_, 8), 0);
  EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  port_ = ntohs(addr.sin_port);
  if (!accept) return;
  acceptor_ = std::thread([this] {
    for (int index = 0;; ++index) {
      const int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;  // shut down
      std::lock_guard<std::mutex> lock(mu_);
      clients_.push_back(client);
      handlers_.emplace_back([this, client, index] {
        behave_(client, index);
        ::shutdown(client, SHUT_RDWR);  // hangs up (closed by the destructor)
      });
    }
  });
}

LoopbackPeer::~LoopbackPeer() {
  ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
  ::close(fd_);
  std::lock_guard<std::mutex> lock(mu_);
  for (int client : clients_) ::shutdown(client, SHUT_RDWR);  // wakes a handler's read
  for (std::thread& t : handlers_) t.join();
  for (int client : clients_) ::close(client);
}

namespace {

SSL_CTX* ServerContext(const TlsPeerPki& pki, bool refuse_alpn) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  BIO* cert =
      BIO_new_mem_buf(pki.server.cert_pem.data(), static_cast<int>(pki.server.cert_pem.size()));
  BIO* key =
      BIO_new_mem_buf(pki.server.key_pem.data(), static_cast<int>(pki.server.key_pem.size()));
  X509* x = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
  EVP_PKEY* k = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
  EXPECT_EQ(SSL_CTX_use_certificate(ctx, x), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx, k), 1);
  X509_free(x);
  EVP_PKEY_free(k);
  BIO_free(cert);
  BIO_free(key);
  if (refuse_alpn) {
    SSL_CTX_set_alpn_select_cb(
        ctx,
        [](SSL*, const unsigned char**, unsigned char*, const unsigned char*, unsigned int, void*) {
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        },
        nullptr);
  }
  return ctx;
}

}  // namespace

void ServeTls(const TlsPeerPki& pki, bool refuse_alpn, int fd, int linger_ms) {
  SSL_CTX* ctx = ServerContext(pki, refuse_alpn);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) == 1 && linger_ms > 0) {
    char buf[256];
    timeval tv{linger_ms / 1000, (linger_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (SSL_read(ssl, buf, sizeof(buf)) > 0) {
    }
  } else if (linger_ms == 0) {
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
}

}  // namespace parity::testing
