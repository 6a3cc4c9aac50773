// The check service's options (server/service/check_service.h): the keys it reads, with their
// defaults, nested in the parsed configuration as ServerConfig::service
// (server/config/server_config.h binds each key to its member here), and what the composition
// root adds at start. A leaf.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/limits.h"

namespace parity::common {
class ClientCertificates;
}  // namespace parity::common

namespace parity::server {

struct CallOrigin;
class ReplicaSink;

struct ServiceOptions {
  std::vector<int64_t> rank_list;  // run_ut.rank_list: a Hello of another rank is refused
  uint32_t max_streams = 1024;     // parity.max_streams
  // parity.max_partial_blob_bytes: all streams' chunked tensors awaiting their call
  uint64_t max_partial_blob_bytes = uint64_t{4} << 30;
  uint64_t max_kept_blob_bytes = uint64_t{8} << 30;  // parity.max_kept_blob_bytes
  uint32_t verdict_hold_ms = 10;                     // parity.verdict_hold_ms
  // parity.max_unsent_verdict_bytes: a stream's verdicts waiting to be written (its reader behind)
  uint64_t max_unsent_verdict_bytes = uint64_t{16} << 20;

  // Set by the composition root at start, not keys of their own here:
  common::DecodeLimits limits;  // parity.limits.*: one message's tensors
  // What the answer to a Hello (ServerInfo) says of this server; the session adds the protocol
  // version, its id, the blob bytes it keeps for the stream and the dtypes it accepts (all).
  struct Facts {
    std::string server_version, bench_device, torch_version;
    uint64_t max_message_bytes = 0, max_tensor_bytes = 0, max_call_bytes = 0;
    uint64_t kept_blob_bytes = 0;  // the most a stream may have kept (parity.kept_blob_bytes)
    bool golden_enabled = false;
  };
  Facts server;
  // Mutual TLS: the client certificates a stream is refused for (UNAUTHENTICATED, with the
  // reason; counted by cause in parity_server_tls_refusals_total), crl.pem's included. Null:
  // plaintext or TLS without ca.crt.
  std::shared_ptr<const common::ClientCertificates> clients;
  // Where the streams' ReplicaReports go (server/check/replica_check.h); null: they are read and
  // dropped.
  ReplicaSink* replicas = nullptr;
  // Runs once a stream that sent a Hello has ended, after every call it sent was handled (the
  // result writer writes the rank's waiting result rows). On a gRPC thread; must not throw.
  std::function<void(const CallOrigin& origin)> on_stream_end;
};

}  // namespace parity::server
