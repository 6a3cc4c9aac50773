#include "common/config/config_keys.h"
#include "common/config/config_keys_internal.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace parity::common {
namespace {

// Functions, not namespace-scope objects: the tables may be built while shared libraries are
// still being initialised (LD_PRELOAD's constructor reads PARITY_CONFIG before main).
std::vector<std::pair<std::string, QueuePolicy>> Policies() {
  return {{"drop", QueuePolicy::kDrop}, {"block", QueuePolicy::kBlock}};
}
std::vector<std::pair<std::string, BudgetPeriod>> Periods() {
  return {{"step", BudgetPeriod::kStep}, {"run", BudgetPeriod::kRun}};
}
std::vector<std::pair<std::string, ApiNames>> ApiNameSources() {
  return {{"call_site", ApiNames::kCallSite}, {"operator", ApiNames::kOperator}};
}
}  // namespace

namespace config_internal {

const char kNfsHelp[] =
    "shared-storage (NFS) mode is not supported: Parity streams calls over gRPC. Remove nfs_path "
    "(or set it to \"\") and set host and port to the benchmark server";

const char kPlaintextWarning[] =
    "empty: plaintext, as msprobe takes it: every tensor crosses the network unencrypted and "
    "anyone on the path can read or alter it. Point tls_path at the certificates for mutual TLS "
    "(docs/tls.md), or set parity.plaintext to true to say that plaintext is meant";

std::vector<std::string> LogLevels() { return {"debug", "info", "warning", "error"}; }

const char* const kOtherTaskSections[] = {"statistics", "overflow_check", "free_benchmark",
                                          "grad_probe", "structure"};

}  // namespace config_internal

using config_internal::kNfsHelp;
using config_internal::kOtherTaskSections;
using config_internal::kPlaintextWarning;
using config_internal::LogLevels;

const KeyTable<AgentConfig>& AgentTable() {
  static const auto* table = [] {
    auto* t = new KeyTable<AgentConfig>();
    using C = AgentConfig;
    t->Custom(
        "task", KeyKind::kString,
        [](ConfigReader& r, const std::string& n, C& c) {
          r.String(n, &c.task);
          if (c.task == "run_ut") {
            r.Error(n,
                    "\"run_ut\" is the benchmark server's task; the agent's config needs "
                    "\"task\": \"tensor\" with a \"tensor\" section");
          } else if (c.task != "tensor") {
            r.Error(n, absl::StrCat("Parity's agent runs msprobe's \"tensor\" task with "
                                    "online_run_ut; got \"",
                                    c.task, "\""));
          }
        },
        nullptr, "must be \"tensor\"");
    t->String(
        "dump_path", [](C& c) { return &c.dump_path; },
        "accepted for compatibility; Parity writes no dump");
    t->Custom(
        "level", KeyKind::kChoice,
        [](ConfigReader& r, const std::string& n, C& c) {
          r.Choice(n, &c.level, {"L0", "L1", "L2", "mix", "debug"});
          if (c.level != "L1") {
            r.Warning(n,
                      "Parity checks every top-level aten operator (msprobe's L1) whatever "
                      "the level; module paths are recorded when the model is given to "
                      "start()");
          }
        },
        nullptr, "L0, L1, L2, mix or debug: Parity always checks every top-level operator (L1)");
    t->IndexList(
        "rank", [](C& c) { return &c.rank; }, "ranks that send calls; [] = every rank");
    t->IndexList(
        "step", [](C& c) { return &c.step; }, "steps that send calls; [] = every step");
    t->Int(
        "seed", [](C& c) { return &c.seed; }, 0, int64_t{4294967295},
        "when set (or is_deterministic is), PrecisionDebugger calls seed_all(seed, "
        "is_deterministic); msprobe's range [0, 2^32-1]");
    t->Bool(
        "is_deterministic", [](C& c) { return &c.is_deterministic; },
        "seed_all's mode: deterministic algorithms, HCCL_DETERMINISTIC");
    for (const char* k : {"enable_dataloader", "acl_config", "framework", "async_dump"}) {
      t->Ignored(k, "msprobe dump option with no meaning for online checking");
    }
    for (const char* k : kOtherTaskSections) t->Accepted(k, "another msprobe task's section");
    t->Accepted("run_ut", "the server's section (one file may serve both sides)");
    t->Accepted("precision",
                "msprobe's decimals in its result files; Parity writes 14, msprobe's "
                "default");
    t->StringList(
        "tensor.scope", [](C& c) { return &c.scope; },
        "[start, end]: check only calls from the first matching start to the first matching end");
    t->StringList(
        "tensor.list", [](C& c) { return &c.list; },
        "check only calls these names select, or whose names contain one of these strings");
    t->Custom(
        "tensor.online_run_ut", KeyKind::kBool,
        [](ConfigReader& r, const std::string& n, C& c) {
          if (!r.Has(n)) {
            r.Accepted(n);
            return;
          }
          bool on = true;
          r.Bool(n, &on);
          if (!on) r.Warning(n, "false: Parity always checks online");
        },
        nullptr, "Parity always checks online; false gives a warning");
    t->Custom(
        "tensor.nfs_path", KeyKind::kString,
        [](ConfigReader& r, const std::string& n, C&) {
          std::string nfs;
          r.String(n, &nfs);
          if (!nfs.empty()) r.Error(n, kNfsHelp);
        },
        nullptr, "not supported: a non-empty value is an error");
    t->String(
        "tensor.host", [](C& c) { return &c.host; }, "the benchmark server's address");
    t->Custom(
        "tensor.port", KeyKind::kInteger,
        [](ConfigReader& r, const std::string& n, C& c) {
          int64_t port = c.port;
          r.Int(n, &port, INT64_MIN, INT64_MAX);
          if (port == -1 || (port >= 1 && port <= 65535)) {
            c.port = port;  // -1: msprobe's "unset", reported by the validation
          } else {
            r.Error(n, absl::StrCat("must be between 1 and 65535, got ", port));
          }
        },
        [](const C& c) { return absl::StrCat(c.port); }, "the benchmark server's port, 1-65535");
    t->Custom(
        "tensor.tls_path", KeyKind::kString,
        [](ConfigReader& r, const std::string& n, C& c) {
          r.String(n, &c.tls_path);
          if (c.tls_path.empty()) {  // msprobe's way of asking for plaintext
            c.parity.plaintext = true;
            r.Warning(n, kPlaintextWarning);
          }
        },
        [](const C& c) { return c.parity.plaintext ? std::string("(plaintext)") : c.tls_path; },
        "folder with ca.crt, and client.crt + client.key for mutual TLS; default \"./\" (as in "
        "msprobe); \"\": plaintext, with a warning (as in msprobe)");
    t->Custom(
        "tensor.online_run_ut_recompute", KeyKind::kBool,
        [](ConfigReader& r, const std::string& n, C& c) {
          bool recompute = false;
          r.Bool(n, &recompute);
          if (recompute) c.parity.capture_backward = false;
        },
        nullptr, "true turns off backward capture (as in msprobe)");
    t->Ignored("tensor.data_mode", "Parity always captures inputs at entry and outputs at exit");
    t->Ignored("tensor.file_format", "Parity writes no dump files");
    t->Ignored("tensor.summary_mode", "Parity writes no dump files");

    t->Bytes(
        "parity.queue_max_bytes", [](C& c) { return &c.parity.queue_max_bytes; },
        "memory the send queue may hold");
    t->Bytes(
        "parity.snapshot_pool_bytes", [](C& c) { return &c.parity.snapshot_pool_bytes; },
        "free snapshot buffers kept for reuse, and as much of snapshots of unchanged tensors given "
        "again instead of copied (0: every copy allocates, every tensor copied at every call)");
    t->Bytes(
        "parity.reuse_bytes", [](C& c) { return &c.parity.reuse_bytes; },
        "tensors sent once and named again when equal, per connection (0: every tensor is sent)");
    t->Int(
        "parity.queue_max_calls", [](C& c) { return &c.parity.queue_max_calls; }, 1, 1 << 24,
        "calls the send queue may hold");
    t->Int(
        "parity.batch_calls", [](C& c) { return &c.parity.batch_calls; }, 1, 4096,
        "calls waiting in the queue together sent in one message (1: each alone)");
    t->Int(
        "parity.background_nice", [](C& c) { return &c.parity.background_nice; }, 0, 19,
        "added to the nice value of the agent's own threads, so the training runs first");
    t->EnumChoice(
        "parity.policy", [](C& c) { return &c.parity.policy; }, Policies(),
        "full queue: wait for room (block, the default: at most block_timeout_ms, then drop "
        "until the queue drains to half) or drop the call at once; drops are counted");
    t->Int(
        "parity.block_timeout_ms", [](C& c) { return &c.parity.block_timeout_ms; }, 0, UINT32_MAX,
        "with policy block: longest wait for room per call (a wait that runs out drops calls "
        "until the queue drains to half); 0 = no limit");
    t->Int(
        "parity.max_checks_per_signature", [](C& c) { return &c.parity.max_checks_per_signature; },
        0, UINT32_MAX,
        "check each (op, overload, dtypes, shapes) at most this often; 0 = every call");
    t->EnumChoice(
        "parity.api_names", [](C& c) { return &c.parity.api_names; }, ApiNameSources(),
        "msprobe's API names in the result CSVs: from the Python call site (Tensor.add, "
        "Torch.add; the Python agent names each torch call it sees) or from the operator");
    t->EnumChoice(
        "parity.budget_period", [](C& c) { return &c.parity.budget_period; }, Periods(),
        "the period over which that budget counts");
    t->Bool(
        "parity.fail_fast", [](C& c) { return &c.parity.fail_fast; },
        "step() raises after the server reported an error");
    t->Bool(
        "parity.plaintext", [](C& c) { return &c.parity.plaintext; },
        "send unencrypted (required for an empty tls_path)");
    t->String(
        "parity.server_name", [](C& c) { return &c.parity.server_name; },
        "name the server certificate must carry, when it differs from host");
    t->String(
        "parity.tls_key_password_file", [](C& c) { return &c.parity.tls_key_password_file; },
        "file whose first line is client.key's passphrase; empty: $PARITY_TLS_KEY_PASSWORD");
    t->Int(
        "parity.connect_timeout_ms", [](C& c) { return &c.parity.connect_timeout_ms; }, 1,
        UINT32_MAX, "one connection attempt");
    t->Int(
        "parity.reconnect_initial_ms", [](C& c) { return &c.parity.reconnect_initial_ms; }, 1,
        UINT32_MAX, "first back-off after a failed connection");
    t->Int(
        "parity.reconnect_max_ms", [](C& c) { return &c.parity.reconnect_max_ms; }, 1, UINT32_MAX,
        "longest back-off");
    t->Int(
        "parity.flush_timeout_ms", [](C& c) { return &c.parity.flush_timeout_ms; }, 0, UINT32_MAX,
        "the end of the session waits at most this long for undelivered calls");
    t->Bool(
        "parity.detect_random", [](C& c) { return &c.parity.detect_random; },
        "notice calls that draw random numbers without being in an operator catalogue (their "
        "generator moved): sent as random calls, replayed from the state read at entry");
    t->Bool(
        "parity.detect_input_writes", [](C& c) { return &c.parity.detect_input_writes; },
        "compare each read-only tensor argument of a checked call after the call with its copy "
        "at entry: a call that wrote one is an error (input_written)");
    t->Bool(
        "parity.wait_for_server_at_exit", [](C& c) { return &c.parity.wait_for_server_at_exit; },
        "the end of the session waits flush_timeout_ms for a server that is unreachable");
    t->Int(
        "parity.stats_interval_ms", [](C& c) { return &c.parity.stats_interval_ms; }, 1, UINT32_MAX,
        "how often the agent reports its counters to the server");
    t->Bytes(
        "parity.max_inline_tensor_bytes", [](C& c) { return &c.parity.max_inline_tensor_bytes; },
        "larger tensors travel in chunks");
    t->Bytes(
        "parity.max_tensor_bytes", [](C& c) { return &c.parity.max_tensor_bytes; },
        "larger tensors travel as statistics only");
    t->Bool(
        "parity.checksum", [](C& c) { return &c.parity.checksum; }, "CRC-32C on every payload");
    t->Bool(
        "parity.capture_backward", [](C& c) { return &c.parity.capture_backward; },
        "capture backward operators");
    t->String(
        "parity.operator_catalogue", [](C& c) { return &c.parity.operator_catalogue; },
        "a catalogue file adding operators (random, never replayed, communication) to the "
        "built-in one; give the server the same file");
    t->StringList(
        "parity.white_list", [](C& c) { return &c.parity.white_list; },
        "check only the calls these names (any form: gelu, Torch.matmul) select; [] = all");
    t->StringList(
        "parity.black_list", [](C& c) { return &c.parity.black_list; },
        "never check these ops; wins over white_list");
    t->String(
        "parity.run_id", [](C& c) { return &c.parity.run_id; },
        "shared by all ranks of one run; default: generated");
    t->Choice(
        "parity.log_level", [](C& c) { return &c.parity.log_level; }, LogLevels(),
        "agent log verbosity");
    return t;
  }();
  return *table;
}

}  // namespace parity::common
