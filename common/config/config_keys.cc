#include "common/config/config_keys.h"
#include "common/config/shared_keys.h"

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

const char kPrecisionHelp[] =
    "not a key of msprobe's config.json (its `statistics` section's `precision` is the "
    "statistics' high/low; the 14 decimals of its run_ut CSVs come from its own "
    "api_accuracy_checker/config.yaml): accepted, no effect; Parity writes 14 decimals";

std::vector<std::string> LogLevels() { return {"debug", "info", "warning", "error"}; }

void ReadTlsPath(ConfigReader& r, const std::string& name, std::string* tls_path, bool* plaintext) {
  r.String(name, tls_path);
  if (tls_path->empty()) {
    *plaintext = true;
    r.Warning(name, kPlaintextWarning);
  }
}

std::string ShowTlsPath(const std::string& tls_path, bool plaintext) {
  return plaintext ? std::string("(plaintext)") : tls_path;
}

const char* const kOtherTaskSections[] = {"statistics", "overflow_check", "free_benchmark",
                                          "grad_probe", "structure",      "diff_check",
                                          "nan_check"};

}  // namespace config_internal

using config_internal::kNfsHelp;
using config_internal::kOtherTaskSections;
using config_internal::LogLevels;

const KeyTable<AgentConfig>& AgentTable() {
  using C = AgentConfig;
  using K = KeyRows<C>;
  // Built on first use and never destroyed: the agent reads its config from library constructors
  // and may still log at exit.
  static const auto* table = new KeyTable<C>({
      K::Custom(
          "task", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C& c) {
            r.String(n, &c.task);
            if (c.task == "run_ut" || c.task == "acc_check") {
              r.Error(n, absl::StrCat("\"", c.task,
                                      "\" is the benchmark server's task (acc_check: msprobe "
                                      "26.x's name for run_ut); the agent's config needs "
                                      "\"task\": \"tensor\" with a \"tensor\" section"));
            } else if (c.task != "tensor") {
              r.Error(n, absl::StrCat("Parity's agent runs msprobe's \"tensor\" task with "
                                      "online_run_ut; got \"",
                                      c.task, "\""));
            }
          },
          nullptr, "must be `\"tensor\"`"),
      K::String(
          "dump_path", [](C& c) { return &c.dump_path; },
          "accepted for compatibility; Parity writes no dump"),
      K::Custom(
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
          nullptr,
          "Parity always checks every top-level aten operator (msprobe's L1); other levels give a "
          "warning")
          .DocsType("`\"L0\"`, `\"L1\"`, `\"L2\"`, `\"mix\"`")
          .DocsDefault("`\"L1\"`"),
      K::IndexList(
          "rank", [](C& c) { return &c.rank; },
          "ranks that send calls; a process without a process group is rank 0")
          .DocsDefault("`[]` = every rank"),
      K::IndexList(
          "step", [](C& c) { return &c.step; }, "steps that send calls")
          .DocsDefault("`[]` = every step"),
      K::Int(
          "seed", [](C& c) { return &c.seed; }, 0, int64_t{4294967295},
          "in `[0, 2^32-1]`; Parity's key, not msprobe's (msprobe 8.1.1 reads neither): when the "
          "config sets `seed` or `is_deterministic`, `PrecisionDebugger(...)` calls "
          "`seed_all(seed, is_deterministic, rm_dropout=False)`; a training that does not ask is "
          "left unseeded"),
      K::Bool(
          "is_deterministic", [](C& c) { return &c.is_deterministic; },
          "`seed_all`'s `mode`: `torch.use_deterministic_algorithms`, `HCCL_DETERMINISTIC`"),
      K::Bool(
          "enable_dataloader", [](C& c) { return &c.enable_dataloader; },
          "msprobe's: the training's `torch.utils.data.DataLoader` drives the session, so that "
          "the script calls none of `start()`, `stop()`, `step()` (msprobe 8.1.1's "
          "`_iter_tracer`, msprobe/pytorch/debugger/precision_debugger.py): each batch fetched "
          "after the first ends the step (`stop()`, `step()`) and the next begins once it is "
          "fetched (`start()`); the `step` list selects steps as usual and the session ends after "
          "its last. While on, the script's own `start()` and `stop()` are skipped with a note, "
          "as msprobe skips them. The Python front end's (`PrecisionDebugger`); the LD_PRELOAD and "
          "C++ agents count steps from `optimizer.step()` and ignore it"),
      K::Ignored({"acl_config", "framework", "async_dump", "extra_info"},
                 "msprobe dump option with no meaning for online checking"),
      K::AcceptedEach(kOtherTaskSections, "another msprobe task's section"),
      K::Accepted("run_ut", "the server's section (one file may serve both sides)"),
      K::Accepted("acc_check", "the server's section under msprobe 26.x's name for run_ut"),
      K::Accepted("precision", config_internal::kPrecisionHelp),
      K::StringList(
          "tensor.scope", [](C& c) { return &c.scope; },
          "check only the calls from the first matching `start` through the first matching `end`, "
          "each step. Names in any [form](migration.md#names): `\"aten::add.Tensor.3\"` as the "
          "CSVs print them, `\"Functional.linear.0.forward\"` as msprobe does")
          .DocsType("list of strings, `[start, end]`"),
      K::StringList(
          "tensor.list", [](C& c) { return &c.list; },
          "check only the calls these names select ([any form](migration.md#names): "
          "`\"Functional.linear\"`, `\"aten::mm\"`, `\"cross_entropy\"`), or whose Parity or "
          "msprobe name contains one of these strings (msprobe's fuzzy match: `\"conv\"`); not "
          "with `scope`"),
      K::Custom(
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
          nullptr, "Parity always checks online; `false` gives a warning")
          .DocsDefault("`true`"),
      K::Custom(
          "tensor.nfs_path", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C&) {
            std::string nfs;
            r.String(n, &nfs);
            if (!nfs.empty()) r.Error(n, kNfsHelp);
          },
          nullptr,
          "**not supported**: a non-empty value is an error; Parity streams over gRPC, set `host` "
          "and `port`")
          .DocsDefault("`\"\"`"),
      K::String(
          "tensor.host", [](C& c) { return &c.host; },
          "benchmark server address (name, IPv4 or IPv6), or several, comma-separated (`host` or "
          "`host:port`, `[v6]:port`), or a DNS name resolving to several: the agents spread over "
          "them and fail over ([deploy.md](deploy.md#many-servers))")
          .DocsDefault("required"),
      K::Custom(
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
          [](const C& c) { return absl::StrCat(c.port); },
          "benchmark server port, 1–65535 (msprobe's `-1` means unset: an error)")
          .DocsDefault("required"),
      K::Custom(
          "tensor.tls_path", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C& c) {
            config_internal::ReadTlsPath(r, n, &c.tls_path, &c.parity.link.plaintext);
          },
          [](const C& c) {
            return config_internal::ShowTlsPath(c.tls_path, c.parity.link.plaintext);
          },
          "folder with `ca.crt`, and `client.crt` + `client.key` for mutual TLS; `\"\"`: "
          "plaintext, as in msprobe, with a warning")
          .DocsDefault("`\"./\"` (msprobe's default)"),
      K::Custom(
          "tensor.online_run_ut_recompute", KeyKind::kBool,
          [](ConfigReader& r, const std::string& n, C& c) {
            bool recompute = false;
            r.Bool(n, &recompute);
            if (recompute) c.parity.capture.capture_backward = false;
          },
          nullptr, "`true` turns off backward capture (as in msprobe)")
          .DocsDefault("`false`"),
      K::Ignored("tensor.data_mode", "Parity always captures inputs at entry and outputs at exit"),
      K::Ignored("tensor.file_format", "Parity writes no dump files"),
      K::Ignored("tensor.summary_mode", "Parity writes no dump files"),
      K::Ignored("tensor.bench_path", "msprobe 26.x's dump comparison path: Parity writes no dump"),
      K::Bytes(
          "parity.queue_max_bytes", [](C& c) { return &c.parity.sender.queue_max_bytes; },
          "memory the send queue may hold; snapshots of accelerator tensors stay in device memory "
          "until the sender copies them to the host, so this also bounds the device memory the "
          "agent holds"),
      K::Bytes(
          "parity.snapshot_pool_bytes", [](C& c) { return &c.parity.capture.snapshot_pool_bytes; },
          "free host buffers the agent keeps for its snapshot copies (of 16 KiB or more), so a "
          "copy reuses memory that is already mapped instead of taking page faults on fresh pages; "
          "and, as much again, the snapshots of tensors that a later call may read unchanged (of 4 "
          "KiB or more: a weight between optimizer steps, an activation the next op or the "
          "backward reads), with, on an accelerator, their host copies. Only what is proven "
          "unchanged is given again: on the host, a tensor whose every bit still equals its "
          "earlier snapshot (compared whole) gets that snapshot with no copy; on an accelerator "
          "every call's copy is made on the device, which compares it bit for bit with the earlier "
          "one, and the copy out of the device is saved only when nothing differs. Starting "
          "capture again forgets every snapshot. The agent's host memory is at most three times "
          "this plus `queue_max_bytes`. "
          "`0` turns pool and snapshot cache off (every tensor copied at every call)"),
      K::Bytes(
          "parity.reuse_bytes", [](C& c) { return &c.parity.link.reuse_bytes; },
          "tensors the agent sends once per connection and then names again instead of resending "
          "equal bytes (an op's output is the next op's input, a weight is read by the forward and "
          "both backward matmuls: 68-70% of the bytes of the example Llama). Equality is compared "
          "byte for byte against the copy the agent sent and kept, never guessed from a hash. "
          "Tensors of 16 KiB or more, each at most a quarter of the table; least recently used "
          "ones are released first. At most the server's `parity.kept_blob_bytes` (the smaller "
          "wins; `0` on either side: every tensor is sent in full). Costs the agent up to this "
          "much host memory for those copies, on top of the queue and the pool"),
      K::Int(
          "parity.queue_max_calls", [](C& c) { return &c.parity.sender.queue_max_calls; }, 1,
          1 << 24, "calls the send queue may hold"),
      K::Int(
          "parity.batch_calls", [](C& c) { return &c.parity.sender.batch_calls; }, 1, 4096,
          "calls already waiting in the send queue that the sender writes together in one message "
          "(a `MessageBatch`, with the chunks and releases they need), to a server whose "
          "`ServerInfo.accepts_batches` says it takes them; a message stays within half the "
          "server's `max_message_bytes`. Fewer messages, fewer hand-offs between threads on both "
          "sides; a call that is alone in the queue goes alone, without waiting. The agent also "
          "tells the server (`Hello.accepts_batches`) that it takes verdicts ready together in one "
          "message (a `VerdictBatch`, at most 64 verdicts and 1 MiB). `1`: every call in its own "
          "messages, and every verdict in its own"),
      K::Int(
          "parity.background_nice", [](C& c) { return &c.parity.link.background_nice; }, 0, 19,
          "added to the nice value of the agent's own threads: the sender (`parity-sender`) and "
          "the gRPC threads that run its stream's reactions (each once, Linux; gRPC shares those "
          "threads within the process). When the cores are busy the scheduler runs the training's "
          "threads first and the agent's encoding, TLS and socket writes wait (in the bounded "
          "queue, under `policy`), instead of preempting the training. On the 2-core development "
          "VM this took the agent's cost on the Llama workload from 1.48x to 1.25x of the bare "
          "step ([performance.md](performance.md)). `0`: the training's priority. A process that "
          "is itself niced keeps the difference (capped at 19)")
          .DocsType("integer 0-19"),
      K::EnumChoice(
          "parity.policy", [](C& c) { return &c.parity.sender.policy; }, Policies(),
          "full queue: `block` waits for room (every call is checked while the server keeps up; at "
          "most `block_timeout_ms` a call, see below), `drop` drops the call at once and counts it "
          "(the training never waits: for the latency-first user). msprobe blocks too (up to 60 s "
          "a call, then drops the call with a log line)")
          .DocsType("`\"block\"`, `\"drop\"`"),
      K::Int(
          "parity.block_timeout_ms", [](C& c) { return &c.parity.sender.block_timeout_ms; }, 0,
          UINT32_MAX,
          "with `block`: the longest wait for room per call. A wait that runs out means the server "
          "took no call for that long: the agent then drops calls without waiting (counted as "
          "`queue_full`, logged once: `policy block: the server took no call for …`) until the "
          "server moves again, and waits again after that: once the server has taken a quarter of "
          "`queue_max_calls` calls (16 at least, 256 at most) since the wait ran out, the last of "
          "them within half a `block_timeout_ms` (logged: `the server takes calls again (N since "
          "the wait ran out), at its own pace`), or once the queue has drained to half (logged: "
          "`the server caught up`). A server slower than the training then paces it, as `block` "
          "means, instead of the rest of the run being dropped. So a stalled or frozen server "
          "costs the training one timeout per congestion, not one per call (msprobe's 60 s a call "
          "can stall a training, and every rank in its collectives, for hours). The ranks of one "
          "host that stream to the same server share their breakers (a small shared-memory "
          "segment, `/dev/shm/parity-breaker-v1-<uid>-<hash>`): once one rank's wait has run out, "
          "the others drop at once instead of each waiting out its own timeout while the rest "
          "wait for it in their collectives (logged: `policy block: another rank on this host "
          "waited …`), until a rank sees the server move again; so a frozen server costs the "
          "ranks of a host one timeout, not one each. A frozen server "
          "(stopped, or a host that vanished without closing its connections) still looks "
          "connected until gRPC's keepalive gives up on it (20-80 s); until then the agent waits "
          "once, then drops (`queue_full`); after it, calls are dropped as `disconnected` at once "
          "while the agent reconnects. `0` = no limit while connected. During the session's first "
          "connection attempt calls wait too, for its connection only (at most "
          "`connect_timeout_ms`: a failed attempt is diagnosed after their wait); when "
          "disconnected after that, calls wait in the queue while it has room (sent if the agent "
          "reconnects) and are dropped at once beyond it, counted as `disconnected`, as are those "
          "still queued for want of a server when the session ends "
          "([troubleshooting.md](troubleshooting.md#why-a-call-was-not-checked)). The time the "
          "training spent waiting is the counter `blocked_seconds` and ends the exit line"),
      K::Int(
          "parity.max_checks_per_signature",
          [](C& c) { return &c.parity.capture.max_checks_per_signature; }, 0, UINT32_MAX,
          "check each distinct (op, overload, dtypes, shapes) at most this many times")
          .DocsDefault("`0` = all"),
      K::EnumChoice(
          "parity.api_names", [](C& c) { return &c.parity.capture.api_names; }, ApiNameSources(),
          "where msprobe's API names in the result CSVs come from: the Python function the "
          "training called (`Tensor.add`, `Torch.add`, counted apart, as msprobe names them; the "
          "Python agent names each torch call while capturing, a few microseconds each: "
          "[measured](benchmarks/2026-11-26.md#call-site-names-2026-11-26)), or the operator "
          "(`aten::add` is "
          "`Torch.add`: no per-call work in Python). The naming is a TorchFunctionMode that steps "
          "aside while Dynamo traces, so `torch.compile` works with either "
          "([operators.md](operators.md#torchcompile), "
          "[results.md](results.md#names-in-the-csvs-msprobes))"),
      K::EnumChoice(
          "parity.budget_period", [](C& c) { return &c.parity.capture.budget_period; }, Periods(),
          "the period over which that budget counts"),
      K::Bool(
          "parity.fail_fast", [](C& c) { return &c.parity.fail_fast; },
          "`step()` raises after the server reported an `error`"),
      K::Bool(
          "parity.plaintext", [](C& c) { return &c.parity.link.plaintext; },
          "send unencrypted (an empty `tls_path` sets it, with a warning)"),
      K::String(
          "parity.server_name", [](C& c) { return &c.parity.link.server_name; },
          "name the server certificate must carry, when it differs from `host`"),
      K::String(
          "parity.tls_key_password_file", [](C& c) { return &c.parity.link.tls_key_password_file; },
          "file whose first line is the passphrase of an encrypted `client.key`; empty: "
          "`$PARITY_TLS_KEY_PASSWORD` ([tls.md](tls.md#passphrase-protected-keys))"),
      K::Int(
          "parity.connect_timeout_ms", [](C& c) { return &c.parity.link.connect_timeout_ms; }, 1,
          UINT32_MAX, "one connection attempt"),
      K::Int(
          "parity.reconnect_initial_ms", [](C& c) { return &c.parity.link.reconnect_initial_ms; },
          1, UINT32_MAX,
          "first back-off after a failed connection (capped exponential, with jitter)"),
      K::Int(
          "parity.reconnect_max_ms", [](C& c) { return &c.parity.link.reconnect_max_ms; }, 1,
          UINT32_MAX, "longest back-off"),
      K::Int(
          "parity.flush_timeout_ms", [](C& c) { return &c.parity.sender.flush_timeout_ms; }, 0,
          UINT32_MAX,
          "the end of the session (`stop()` at exit, `close()`) waits at most this long in all for "
          "calls not yet delivered; it does not wait at all when nothing can be delivered (TLS "
          "material unusable, the server refused this agent) nor, unless "
          "`parity.wait_for_server_at_exit`, for a server whose last connection attempt failed "
          "(its reason is logged first: a refused port, no route, a certificate)"),
      K::Bool(
          "parity.detect_random", [](C& c) { return &c.parity.capture.detect_random; },
          "watch the generator of every call whose operator no catalogue lists as random; a call "
          "that moved it drew random numbers (`scaled_dot_product_attention` with `dropout_p` > 0, "
          "a fused kernel of your own) and is sent as a random call with the state read at its "
          "entry (`ApiCall.drew_random`): replayed from it, or SKIP saying why, never judged as "
          "deterministic ([operators.md](operators.md#random-numbers-nobody-declared)). About 0.2 "
          "µs a call on the CPU generator (its engine copied at entry, compared at exit; "
          "`build/tests/bench/generator_watch_bench`)"),
      K::Bool(
          "parity.detect_input_writes", [](C& c) { return &c.parity.capture.detect_input_writes; },
          "compare every read-only tensor argument of a call sent with its values, after the call, "
          "with its copy at entry: a call that changed one (a kernel using its input as scratch) "
          "is an error naming the argument "
          "([results.md](results.md#arguments-an-operator-must-only-read)). On the host a `memcmp` "
          "per argument, strided arguments included; on an accelerator one more device copy of "
          "each, queued on the training's stream. Costs about what copying the inputs does: with "
          "every call checked, 1.24x against 1.16x step time without it on the MLP, 1.35x against "
          "1.26x on Llama (`agent_overhead.py --rows \"no replay [once,input-write check [once\"`, "
          "[measured](benchmarks/2026-11-27.md#the-read-only-argument-check-2026-11-27)); with the "
          "default per-signature budget, only the sampled calls pay it"),
      K::Bool(
          "parity.wait_for_server_at_exit",
          [](C& c) { return &c.parity.link.wait_for_server_at_exit; },
          "the end of the session waits up to `flush_timeout_ms` for a server that is unreachable "
          "(one starting after a short training, say) instead of giving up at once"),
      K::Int(
          "parity.stats_interval_ms", [](C& c) { return &c.parity.sender.stats_interval_ms; }, 1,
          UINT32_MAX,
          "how often the agent reports its counters (captured, sent, dropped, lost) to the "
          "server's metrics"),
      K::Bytes(
          "parity.max_inline_tensor_bytes",
          [](C& c) { return &c.parity.link.max_inline_tensor_bytes; },
          "larger tensors are sent in chunks"),
      K::Bytes(
          "parity.max_tensor_bytes", [](C& c) { return &c.parity.link.max_tensor_bytes; },
          "larger tensors are sent as statistics only (min, max, mean, L2 norm, NaN/Inf counts): "
          "the server cannot replay a call with such an input, and judges such an output by the "
          "`statistics` standard ([results.md](results.md))"),
      K::Bool(
          "parity.checksum", [](C& c) { return &c.parity.sender.checksum; },
          "CRC-32C on every payload (TLS already protects integrity)"),
      K::Bool(
          "parity.capture_backward", [](C& c) { return &c.parity.capture.capture_backward; },
          "capture backward operators"),
      K::String(
          "parity.operator_catalogue", [](C& c) { return &c.parity.capture.operator_catalogue; },
          "a [catalogue file](operators.md#the-operator-catalogue) adding your own operators "
          "(random ones, ones never replayed, communication ops) to the built-in catalogue; give "
          "the server the same file. One that does not parse, or classifies a built-in operator "
          "differently, stops the agent"),
      K::StringList(
          "parity.white_list", [](C& c) { return &c.parity.white_list; },
          "check only the calls these names select, [any form](migration.md#names) (`\"gelu\"`, "
          "`\"Torch.matmul\"`, `\"aten::add.Tensor\"`, `\"NPU.npu_rms_norm\"`), and the backward "
          "calls linked to them; empty = all")
          .DocsType("list"),
      K::StringList(
          "parity.black_list", [](C& c) { return &c.parity.black_list; },
          "never check the calls these names select; wins over `white_list`")
          .DocsType("list"),
      K::StringList(
          "parity.replicas", [](C& c) { return &c.parity.replicas; },
          "what every replica of a data-parallel group must hold bit for bit, digested on each "
          "rank and compared across the group by the server, with no replay "
          "([replicas.md](replicas.md)): `\"gradients\"` (what each optimizer step reads, after "
          "the data-parallel all-reduce), `\"parameters\"` (what it wrote), `\"collectives\"` "
          "(the outputs of `torch.distributed`'s `all_reduce`, `all_gather`, `broadcast` and their "
          "`_coalesced` / `_into_tensor` forms). A rank that differs is an error naming it, the "
          "tensor and the step; empty = none")
          .DocsType("list"),
      K::Bool(
          "parity.check_calls", [](C& c) { return &c.parity.capture.check_calls; },
          "capture operator calls and check them against the bench and the golden; `false` with "
          "`parity.replicas` set: only the replicas are compared (no call is copied or sent)"),
      K::String(
          "parity.run_id", [](C& c) { return &c.parity.run_id; }, "shared by all ranks of one run")
          .DocsDefault("generated"),
      K::Choice(
          "parity.log_level", [](C& c) { return &c.parity.log_level; }, LogLevels(),
          "agent log verbosity"),
  });
  return *table;
}

}  // namespace parity::common
