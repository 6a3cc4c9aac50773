// Agent and server configuration: msprobe's config.json keys as they are, plus Parity's own
// "parity" section. Every key, with its default, is documented in docs/configuration.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "common/wire/limits.h"

namespace parity::common {

// What the agent does when its send queue is full.
enum class QueuePolicy {
  kDrop,  // drop the new call and count it: training never waits
  // Wait for room while connected, at most block_timeout_ms a call (msprobe waits up to 60 s);
  // after a wait that ran out, drop (counted) without waiting until the queue has drained to
  // half. Every call is checked while the server keeps up; the default.
  kBlock,
};

// Where msprobe's API names come from (parity.api_names).
enum class ApiNames {
  kCallSite,  // the Python API the training called (python/parity/_call_site.py); the default
  kOperator,  // the operator (common/naming/api_names.h): no per-call work in Python
};

// Over which period the per-signature sampling budget is counted.
enum class BudgetPeriod { kStep, kRun };

// Where the server's float64 golden runs (parity.golden_device): kAuto on the checking thread's
// bench device (a GPU's golden falls back to the CPU for an op it cannot run there), kCpu
// always on the CPU.
enum class GoldenDevice { kAuto, kCpu };

// How the server checks random ops (parity.random_checks, docs/results.md#random-operators):
// kAuto replays them from the training's generator state when the bench has a generator of
// that kind and the same libtorch, else judges them by the random_property standard;
// kStatistical always does that; kSkip answers SKIP.
enum class RandomChecks { kAuto, kStatistical, kSkip };

// The agent's "parity" section.
struct AgentOptions {
  uint64_t queue_max_bytes = uint64_t{256} << 20;
  uint64_t snapshot_pool_bytes = uint64_t{128} << 20;  // free snapshot buffers kept; 0 = none
  // Sent tensors remembered per connection (their snapshots kept) so that an equal one is named
  // instead of sent again; at most the server's ServerInfo.kept_blob_bytes; 0 = off.
  uint64_t reuse_bytes = uint64_t{256} << 20;
  uint32_t queue_max_calls = 1024;
  uint32_t batch_calls = 64;  // calls waiting together sent in one message (1: one each)
  // Added to the nice value of the agent's own threads (the sender, gRPC's callback threads of
  // its stream): the training goes first on busy cores. 0: the training's priority.
  uint32_t background_nice = 10;
  QueuePolicy policy = QueuePolicy::kBlock;
  uint32_t block_timeout_ms = 10000;      // kBlock: longest wait per call; 0 = no limit
  uint32_t max_checks_per_signature = 0;  // 0 = check every call
  BudgetPeriod budget_period = BudgetPeriod::kRun;
  ApiNames api_names = ApiNames::kCallSite;
  bool fail_fast = false;             // step() raises after an error verdict
  bool plaintext = false;             // explicit opt-out of TLS
  std::string server_name;            // TLS name to verify, when it differs from host
  std::string tls_key_password_file;  // passphrase of an encrypted client.key (else the env var)
  uint32_t connect_timeout_ms = 5000;
  uint32_t reconnect_initial_ms = 200;
  uint32_t reconnect_max_ms = 30000;
  uint32_t flush_timeout_ms = 30000;  // stop() waits at most this long for the queue
  // The end of the session waits (flush_timeout_ms) for a server whose last connection attempt
  // failed, for one that comes up late; by default it gives up at once.
  bool wait_for_server_at_exit = false;
  uint32_t stats_interval_ms = 5000;  // how often the agent sends its counters to the server
  uint64_t max_inline_tensor_bytes = uint64_t{4} << 20;  // larger tensors travel in chunks
  uint64_t max_tensor_bytes = uint64_t{256} << 20;       // larger tensors: statistics only
  bool checksum = false;                                 // CRC-32C on every payload
  bool capture_backward = true;
  // Watch the generator of every call whose operator no catalogue lists as random: a call that
  // moved it drew random numbers (SDPA with dropout_p > 0, a user's fused op) and is sent as a
  // random call, never judged as a deterministic one (docs/results.md#random-operators).
  bool detect_random = true;
  // Compare every read-only tensor argument of a call sent with its values, after the call, with
  // its copy at entry: a call that changed one is an error (ApiCall.inputs_written).
  bool detect_input_writes = true;
  // A catalogue file adding operators to the built-in one (common/naming/operators.json's form):
  // random ops, ops never replayed, communication ops of the user's own libraries.
  std::string operator_catalogue;
  std::vector<std::string> white_list;  // bare op names ("gelu"); empty = all
  std::vector<std::string> black_list;  // wins over white_list
  std::string run_id;                   // shared by the ranks of a run; default: generated
  std::string log_level = "info";       // "debug", "info", "warning", "error"
};

// The agent's configuration (msprobe task "tensor" with online_run_ut).
struct AgentConfig {
  std::string task = "tensor";
  std::string dump_path;  // accepted for compatibility; unused
  std::string level = "L1";
  std::vector<int64_t> rank;  // empty = every rank
  std::vector<int64_t> step;  // empty = every step
  int64_t seed = 1234;
  bool is_deterministic = false;
  std::vector<std::string> scope;  // [start, end] range of API names, or empty
  std::vector<std::string> list;   // substrings of API names, or empty
  bool online_run_ut = true;
  std::string host;
  int64_t port = -1;
  std::string tls_path = "./";  // ca.crt [+ client.crt, client.key]; msprobe's default
  AgentOptions parity;
};

// The server's "parity" section.
struct ServerOptions {
  std::string output_dir = "./";
  std::string metrics_host = "0.0.0.0";
  int64_t metrics_port = 9464;  // 0 = ephemeral, -1 = disabled
  uint32_t workers = 0;         // 0 = half the cores, 1 to 4, and at least 2 per GPU of the bench
  // libtorch's threads for one op; 0 = libtorch's own choice, at most the cores over the workers
  uint32_t intra_op_threads = 0;
  uint32_t queue_max_calls = 64;
  uint64_t queue_max_bytes = uint64_t{2} << 30;
  // "auto" (every GPU, else the CPU), "cpu", "cuda" (every GPU), "cuda:N", "cuda:0,cuda:2"
  std::string bench_device = "auto";
  std::string standards_file;  // empty = the file shipped with the server
  bool golden = true;          // float64 golden for three-way standards
  GoldenDevice golden_device = GoldenDevice::kAuto;
  RandomChecks random_checks = RandomChecks::kAuto;
  double random_false_alarm = 1e-6;  // the property checks' false-alarm probability per call
  bool npu_reference = true;         // load libparity_npu_reference.so (torch_npu fused ops)
  std::vector<std::string> reference_libraries;  // more operator libraries (.so) to load
  std::string operator_catalogue;  // a catalogue file adding to the built-in one (the agent's too)
  bool plaintext = false;
  bool allow_plaintext_non_loopback = false;
  std::string tls_key_password_file;  // passphrase of an encrypted server.key (else the env var)
  uint64_t max_message_bytes = uint64_t{64} << 20;
  uint32_t max_streams = 1024;
  uint64_t max_partial_blob_bytes = uint64_t{4} << 30;  // all streams' incomplete chunked tensors
  uint64_t kept_blob_bytes = uint64_t{256} << 20;    // per stream: payloads agents may name again
  uint64_t max_kept_blob_bytes = uint64_t{8} << 30;  // all streams' kept payloads together
  // Ready verdicts wait up to this long to go out together (VerdictBatch) while later calls of
  // the stream are being checked; 0 = each goes as soon as the write before it ends.
  uint32_t verdict_hold_ms = 10;
  uint32_t shutdown_grace_ms = 10000;  // SIGTERM: how long open streams may take to finish
  std::string log_level = "info";      // "debug", "info", "warning", "error"
  bool replay = true;                  // false: answer every call SKIP (transport-only runs)
  bool save_error_data = true;         // error data of calls judged error (run_ut.error_data_path)
  uint64_t error_data_max_bytes = uint64_t{1} << 30;  // all error data of one server run
  uint32_t error_data_per_op = 3;                     // calls saved per operator; 0 = no limit
  DecodeLimits limits;
};

// The server's configuration (msprobe task "run_ut").
struct ServerConfig {
  std::string task = "run_ut";
  std::vector<std::string> white_list;
  std::vector<std::string> black_list;
  std::string error_data_path = "./";  // error data go here; relative: under parity.output_dir
  bool is_online = true;
  std::string host;  // empty: 0.0.0.0 with TLS, 127.0.0.1 in plaintext
  int64_t port = 59208;
  std::vector<int64_t> rank_list;  // empty = every rank (msprobe's [] dropped all)
  std::string tls_path = "./";     // server.crt, server.key [+ ca.crt]; msprobe's default
  ServerOptions parity;
};

// A parsed configuration and the warnings met on the way (unknown keys, ignored keys).
template <typename T>
struct Parsed {
  T config;
  std::vector<std::string> warnings;
};

// One configuration key, as the tables in config.cc define it: for docs, --help, the Python
// front-end and tests.
struct KeyDescription {
  std::string path;           // "parity.workers"
  std::string kind;           // "bool", "integer", "size", "string", "choice", "list", ...
  std::string default_value;  // the effective value of a config with nothing set
  bool shown = false;         // the table shows the key's value (else default_value is "")
  std::string doc;            // what it means (markdown: docs/configuration.md's meaning cell)
  std::string flag;           // the server's command-line flag, "--workers"; "" for none
  std::vector<std::string> choices;
  std::string docs_type, docs_default;  // the docs' cells where given, else empty (made)
};
std::vector<KeyDescription> AgentKeys();
std::vector<KeyDescription> ServerKeys();

// docs/configuration.md's key tables, made from the key tables themselves
// (common/config/config_docs.cc): each table preceded by its marker line
// "<!-- parity-server --config_docs: {agent|server} {msprobe|parity} keys -->". What
// `parity-server --config_docs` prints; ctest config_docs checks the docs hold exactly these.
std::string ConfigDocsMarkdown();
// A meaning cell as plain text for --help: links, emphasis and code marks dropped, wrapped at
// `width` columns after `indent` spaces.
std::string KeyDocAsText(const std::string& doc, std::size_t indent, std::size_t width);

// A command-line flag as given: `--name=value`, `--name value` or `--name` (value absent).
struct FlagValue {
  std::string name;
  std::optional<std::string> value;
};

// Parses and validates an agent config.json text. `source` names the text in errors
// ("config.json"). Errors are INVALID_ARGUMENT listing every problem, one per line, each naming
// the key: `tensor.port: expected an integer, got "abc"`.
absl::StatusOr<Parsed<AgentConfig>> ParseAgentConfig(absl::string_view json_text,
                                                     absl::string_view source = "config");
// The server's: `json_text` may be empty (no file); `flags` override the file's keys (each server
// key has a flag of its last path component: --workers, --max_dims, --rank_list=0,1). Unknown
// flags are errors; errors about a flag's value name the flag and its key.
absl::StatusOr<Parsed<ServerConfig>> ParseServerConfig(absl::string_view json_text,
                                                       absl::string_view source = "config",
                                                       const std::vector<FlagValue>& flags = {});

// Reads `path` and parses it; NOT_FOUND / PERMISSION_DENIED name the path.
absl::StatusOr<Parsed<AgentConfig>> LoadAgentConfig(const std::string& path);
absl::StatusOr<Parsed<ServerConfig>> LoadServerConfig(const std::string& path);

// Cross-field rules, also run by the parsers; for configs built or changed in code.
absl::Status ValidateAgentConfig(const AgentConfig& config);
absl::Status ValidateServerConfig(const ServerConfig& config);

// The effective configuration as "key = value" lines, for the start-up log.
std::string DescribeAgentConfig(const AgentConfig& config);
std::string DescribeServerConfig(const ServerConfig& config);

// A short hex digest of the agent's effective configuration (its description, run_id left out),
// sent in Hello so that ranks started with different settings can be spotted.
std::string AgentConfigDigest(const AgentConfig& config);

// Parses "64MiB", "1GiB", "500KB", "1048576" into bytes.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Reads a whole file into a string (NOT_FOUND, PERMISSION_DENIED, ... name the path).
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace parity::common
