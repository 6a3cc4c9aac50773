// Loopback peers that misbehave the way a user's wrong or wedged server does: one that accepts
// TCP and never answers (the kernel's backlog only), one whose connections a test handles itself,
// and a TLS server with the test's certificate that completes the handshake and then says nothing
// or hangs up. Used by the diagnosis tests (tests/common/transport/tls_diagnose_test.cc) and the
// agent's connection tests (tests/agent/connection_test.cc).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/test_certs.h"

namespace parity::testing {

// A loopback listener. `accept` false: never accepts (the kernel still completes the TCP
// handshake: a stopped server). Otherwise each accepted connection is handed, with its index
// (0, 1, ...), to `behave` on a thread of its own, and hung up when `behave` returns; the
// destructor shuts every connection down and joins those threads.
class LoopbackPeer {
 public:
  LoopbackPeer(bool accept, std::function<void(int fd, int index)> behave);
  ~LoopbackPeer();
  LoopbackPeer(const LoopbackPeer&) = delete;
  LoopbackPeer& operator=(const LoopbackPeer&) = delete;
  int port() const { return port_; }

 private:
  std::function<void(int, int)> behave_;
  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> clients_;
  std::vector<std::thread> handlers_;
};

// Throw-away PKI: the agent's tls_path (ca.crt only) and a localhost server key pair.
struct TlsPeerPki {
  KeyPair ca = MakeCa("Peer CA");
  KeyPair server = MakeLeaf(ca, {"localhost", -1, 30});
  std::string agent_dir = WriteTlsDir(MakeTempDir("parity_peer_") + "/agent", ca.cert_pem, {}, {});
};

// Serves one TLS handshake on `fd` with `pki`'s server certificate (`refuse_alpn`: refusing
// every ALPN protocol, as a TLS server that does not speak HTTP/2 does), then: `linger_ms` 0
// hangs up, above 0 reads and discards for at most that long (says nothing), below 0 does
// nothing more.
void ServeTls(const TlsPeerPki& pki, bool refuse_alpn, int fd, int linger_ms);

}  // namespace parity::testing
