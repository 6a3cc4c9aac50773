// The agent's configuration: msprobe's config.json keys as they are, plus Parity's own "parity"
// section; and what the server's configuration (server/config/server_config.h) shares with it:
// the parse result, key descriptions, flags, docs. Every key, with its default, is documented
// in docs/configuration.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

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

// The agent's "parity" section, nested by the component that reads each key (as the server's
// are: server/config/server_config.h). Each key is read from the file once, into the one field
// its row in common/config/config_keys.cc points at; the components take their part as it is
// (agent/transport/sender.h's SenderOptions is a SenderKeys, connection.h's LinkOptions a
// LinkKeys), with nothing copied key by key.

// The sender's: its queue, batching and pacing (agent/transport/sender.h).
struct SenderKeys {
  uint64_t queue_max_bytes = uint64_t{256} << 20;
  uint32_t queue_max_calls = 1024;
  uint32_t batch_calls = 64;  // calls waiting together sent in one message (1: one each)
  QueuePolicy policy = QueuePolicy::kBlock;
  uint32_t block_timeout_ms = 10000;  // kBlock: longest wait per call; 0 = no limit
  uint32_t flush_timeout_ms = 30000;  // stop() waits at most this long for the queue
  uint32_t stats_interval_ms = 5000;  // how often the agent sends its counters to the server
  bool checksum = false;              // CRC-32C on every payload
};

// The link's: how the server is reached and what its stream carries
// (agent/transport/connection.h).
struct LinkKeys {
  bool plaintext = false;             // explicit opt-out of TLS
  std::string server_name;            // TLS name to verify, when it differs from host
  std::string tls_key_password_file;  // passphrase of an encrypted client.key (else the env var)
  uint32_t connect_timeout_ms = 5000;
  uint32_t reconnect_initial_ms = 200;
  uint32_t reconnect_max_ms = 30000;
  // Added to the nice value of the agent's own threads (the sender, gRPC's callback threads of
  // its stream): the training goes first on busy cores. 0: the training's priority.
  uint32_t background_nice = 10;
  // The end of the session waits (flush_timeout_ms) for a server whose last connection attempt
  // failed, for one that comes up late; by default it gives up at once.
  bool wait_for_server_at_exit = false;
  uint64_t max_inline_tensor_bytes = uint64_t{4} << 20;  // larger tensors travel in chunks
  uint64_t max_tensor_bytes = uint64_t{256} << 20;       // larger tensors: statistics only
  // Sent tensors remembered per connection (their snapshots kept) so that an equal one is named
  // instead of sent again; at most the server's ServerInfo.kept_blob_bytes; 0 = off.
  uint64_t reuse_bytes = uint64_t{256} << 20;
};

// The capture's: which calls the training's hooks take and what they look for
// (agent/transport/session.h, the torch half).
struct CaptureKeys {
  uint64_t snapshot_pool_bytes = uint64_t{128} << 20;  // free snapshot buffers kept; 0 = none
  uint32_t max_checks_per_signature = 0;               // 0 = check every call
  BudgetPeriod budget_period = BudgetPeriod::kRun;
  ApiNames api_names = ApiNames::kCallSite;
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
  // Capture operator calls at all (false: only the replicas are compared).
  bool check_calls = true;
};

struct AgentOptions {
  SenderKeys sender;
  LinkKeys link;
  CaptureKeys capture;
  // The selection's (agent/transport/filters.h, with msprobe's rank, step and list).
  std::vector<std::string> white_list;  // bare op names ("gelu"); empty = all
  std::vector<std::string> black_list;  // wins over white_list
  // The front-end's: what every data-parallel replica must hold alike, digested and compared
  // across the group by the server ("gradients", "parameters", "collectives"; docs/replicas.md).
  std::vector<std::string> replicas;
  // The session's own.
  bool fail_fast = false;          // step() raises after an error verdict
  std::string run_id;              // shared by the ranks of a run; default: generated
  std::string log_level = "info";  // "debug", "info", "warning", "error"
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
  bool enable_dataloader = false;  // the Python front end's: the DataLoader drives start/stop/step
  std::vector<std::string> scope;  // [start, end] range of API names, or empty
  std::vector<std::string> list;   // substrings of API names, or empty
  bool online_run_ut = true;
  std::string host;
  int64_t port = -1;
  std::string tls_path = "./";  // ca.crt [+ client.crt, client.key]; msprobe's default
  AgentOptions parity;
};

// A parsed configuration and the warnings met on the way (unknown keys, ignored keys).
template <typename T>
struct Parsed {
  T config;
  std::vector<std::string> warnings;
};

// One configuration key, as a key table (common/config/config_table.h) defines it: for docs,
// --help, the Python front-end and tests.
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
std::vector<KeyDescription> AgentKeys();  // the server's: server::ServerKeys()

// docs/configuration.md's key tables, made from the key tables themselves
// (common/config/config_docs.cc): each table preceded by its marker line
// "<!-- parity-server --config_docs: {agent|server} {msprobe|parity} keys -->". What
// `parity-server --config_docs` prints (with AgentKeys() and server::ServerKeys()); ctest
// config_docs checks the docs hold exactly these.
std::string ConfigDocsMarkdown(const std::vector<KeyDescription>& agent,
                               const std::vector<KeyDescription>& server);
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
// Reads `path` and parses it; NOT_FOUND / PERMISSION_DENIED name the path.
absl::StatusOr<Parsed<AgentConfig>> LoadAgentConfig(const std::string& path);

// Cross-field rules, also run by the parsers; for configs built or changed in code.
absl::Status ValidateAgentConfig(const AgentConfig& config);

// The effective configuration as "key = value" lines, for the start-up log.
std::string DescribeAgentConfig(const AgentConfig& config);

// A short hex digest of the agent's effective configuration (its description, run_id left out),
// sent in Hello so that ranks started with different settings can be spotted.
std::string AgentConfigDigest(const AgentConfig& config);

// Parses "64MiB", "1GiB", "500KB", "1048576" into bytes.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Reads a whole file into a string (NOT_FOUND, PERMISSION_DENIED, ... name the path).
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace parity::common
