// The server's configuration (msprobe's task "run_ut", and Parity's "parity" section), made of
// the options of the components that read it: each component defines its options struct beside
// itself, with its keys' defaults, and the parsed configuration nests them (the check pipeline's,
// with the checker's and the error data's inside; the service's), so that a component is handed
// its own struct and never sees the rest. What none of them reads is the composition root's
// (ServerOptions). The key table (server/config/server_keys.cc) binds each key to its member;
// docs/configuration.md's server tables are generated from it. Torch-free and gRPC-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/config.h"
#include "common/wire/limits.h"
#include "server/check/pipeline_options.h"
#include "server/check/replica_options.h"
#include "server/service/service_options.h"

namespace parity::common {
template <typename Config>
class KeyTable;
}  // namespace parity::common

namespace parity::server {

// The composition root's own keys (server/app/server.cc): the listener's security, the work
// queue, the operators and standards it loads, logging and metrics, what it announces.
struct ServerOptions {
  std::string metrics_host = "0.0.0.0";
  int64_t metrics_port = 9464;  // 0 = ephemeral, -1 = disabled
  uint32_t workers = 0;         // 0 = half the cores, 1 to 4, and at least 2 per GPU of the bench
  // libtorch's threads for one op; 0 = libtorch's own choice, at most the cores over the workers
  uint32_t intra_op_threads = 0;
  uint32_t queue_max_calls = 64;
  uint64_t queue_max_bytes = uint64_t{2} << 30;
  std::string standards_file;  // empty = the file shipped with the server
  bool npu_reference = true;   // load libparity_npu_reference.so (torch_npu fused ops)
  std::vector<std::string> reference_libraries;  // more operator libraries (.so) to load
  std::string operator_catalogue;  // a catalogue file adding to the built-in one (the agent's too)
  bool plaintext = false;
  bool allow_plaintext_non_loopback = false;
  std::string tls_key_password_file;  // passphrase of an encrypted server.key (else the env var)
  uint64_t max_message_bytes = uint64_t{64} << 20;
  uint64_t kept_blob_bytes = uint64_t{256} << 20;  // per stream: payloads agents may name again
  uint32_t shutdown_grace_ms = 10000;  // SIGTERM: how long open streams may take to finish
  std::string log_level = "info";      // "debug", "info", "warning", "error"
  bool replay = true;                  // false: answer every call SKIP (transport-only runs)
  // One message's tensors: announced in ServerInfo, handed to the service and the pipeline.
  common::DecodeLimits limits;
};

struct ServerConfig {
  std::string task = "run_ut";
  bool is_online = true;
  std::string host;  // empty: 0.0.0.0 with TLS, 127.0.0.1 in plaintext
  int64_t port = 59208;
  std::string tls_path = "./";  // server.crt, server.key [+ ca.crt]; msprobe's default
  ServerOptions parity;
  // run_ut.white_list, black_list, error_data_path; parity.output_dir, save_error_data,
  // error_data_*, and the checker's parity.bench_device, golden, golden_device, random_*.
  PipelineOptions check;
  // run_ut.rank_list; parity.max_streams, max_partial_blob_bytes, max_kept_blob_bytes,
  // verdict_hold_ms.
  ServiceOptions service;
  // parity.replica_wait_ms: the replica checker's (server/check/replica_check.h).
  ReplicaOptions replicas;
};

// The key table: every key, its type, range, description and flag, bound to its member.
const common::KeyTable<ServerConfig>& ServerTable();
std::vector<common::KeyDescription> ServerKeys();

// Parses a server config.json text (`json_text` may be empty: no file); `flags` override the
// file's keys (each server key has a flag of its last path component: --workers, --max_dims,
// --rank_list=0,1). Unknown flags are errors; errors about a flag's value name the flag and its
// key. Errors are INVALID_ARGUMENT listing every problem, one per line, each naming the key.
absl::StatusOr<common::Parsed<ServerConfig>> ParseServerConfig(
    absl::string_view json_text, absl::string_view source = "config",
    const std::vector<common::FlagValue>& flags = {});
// Cross-field rules, also run by the parser; for configs built or changed in code.
absl::Status ValidateServerConfig(const ServerConfig& config);
// The effective configuration as "key = value" lines, for the start-up log.
std::string DescribeServerConfig(const ServerConfig& config);

}  // namespace parity::server
