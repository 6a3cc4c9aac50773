// The server's config keys: one row per key, each bound to the member of the options struct that
// holds it (docs/configuration.md, "Server", is generated from these rows).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_table.h"
#include "common/config/shared_keys.h"
#include "server/config/server_config.h"

namespace parity::server {

using common::config_internal::kNfsHelp;
using common::config_internal::kOtherTaskSections;
using common::config_internal::LogLevels;

namespace {

// Functions, as the agent's choices are (config_keys.cc).
std::vector<std::pair<std::string, GoldenDevice>> GoldenDevices() {
  return {{"auto", GoldenDevice::kAuto}, {"cpu", GoldenDevice::kCpu}};
}
std::vector<std::pair<std::string, RandomChecks>> RandomCheckModes() {
  return {{"auto", RandomChecks::kAuto},
          {"statistical", RandomChecks::kStatistical},
          {"skip", RandomChecks::kSkip}};
}

}  // namespace

using common::ConfigReader;
using common::KeyKind;

const common::KeyTable<ServerConfig>& ServerTable() {
  using C = ServerConfig;
  using K = common::KeyRows<C>;
  static const auto* table = new common::KeyTable<C>({
      K::Custom(
          "task", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C& c) {
            r.String(n, &c.task);
            if (c.task == "tensor") {
              r.Error(n,
                      "\"tensor\" is the agent's task; the server's config needs "
                      "\"task\": \"run_ut\" with a \"run_ut\" section");
            } else if (c.task != "run_ut" && c.task != "acc_check") {
              r.Error(n, absl::StrCat("the server runs msprobe's \"run_ut\" task (\"acc_check\" "
                                      "in msprobe 26.x), got \"",
                                      c.task, "\""));
            }
          },
          nullptr,
          "must be `\"run_ut\"`, or msprobe 26.x's `\"acc_check\"` (its `acc_check` section is "
          "read as the `run_ut` section: [migration.md](migration.md#msprobe-26x))"),
      K::Accepted(
          {"dump_path", "rank", "step", "level", "seed", "is_deterministic", "enable_dataloader",
           "acl_config", "framework", "async_dump", "extra_info", "tensor"},
          "the agent's key (one file may serve both sides)"),
      K::AcceptedEach(kOtherTaskSections, "another msprobe task's section"),
      K::Accepted("precision", common::config_internal::kPrecisionHelp),
      K::StringList(
          "run_ut.white_list", [](C& c) { return &c.check.white_list; },
          "the server checks only the calls these names select ([any form](migration.md#names): "
          "`\"conv2d\"`, `\"Functional.conv2d\"`); the others are answered SKIP")
          .DocsType("list")
          .Flag("white_list"),
      K::StringList(
          "run_ut.black_list", [](C& c) { return &c.check.black_list; },
          "the server never checks the calls these names select; wins over `white_list`")
          .DocsType("list")
          .Flag("black_list"),
      K::String(
          "run_ut.error_data_path", [](C& c) { return &c.check.error_data_path; },
          "where `ut_error_data{ts}/` goes: the inputs and outputs of every call judged error, and "
          "a manifest ([results.md](results.md#error-data-and-the-reproducer)); a relative path is "
          "under `parity.output_dir`. msprobe's online run_ut ignores this key (its doc 08, "
          "accuracy_checker_online_PyTorch.md: only the offline run_ut's `-save_error_data` "
          "saves); Parity's server uses it, and saves by default (`parity.save_error_data`)")
          .Flag("error_data_path"),
      K::Custom(
          "run_ut.is_online", KeyKind::kBool,
          [](ConfigReader& r, const std::string& n, C& c) {
            r.Bool(n, &c.is_online);
            if (!c.is_online) {
              r.Warning(n, "false: Parity's server only checks online (streamed) calls");
            }
          },
          nullptr, "Parity's server is always online; `false` gives a warning")
          .DocsDefault("`true`")
          .Flag("is_online"),
      K::Custom(
          "run_ut.nfs_path", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C&) {
            std::string nfs;
            r.String(n, &nfs);
            if (!nfs.empty()) r.Error(n, kNfsHelp);
          },
          nullptr, "**not supported** (error when set)")
          .DocsDefault("`\"\"`")
          .Flag("nfs_path"),
      K::Custom(
          "run_ut.host", KeyKind::kString,
          [](ConfigReader& r, const std::string& n, C& c) { r.String(n, &c.host); },
          [](const C& c) { return c.host.empty() ? std::string("(default)") : c.host; },
          "address to listen on; empty: `0.0.0.0` with TLS, `127.0.0.1` in plaintext")
          .DocsDefault("`\"\"`")
          .Flag("host"),
      K::Custom(
          "run_ut.port", KeyKind::kInteger,
          [](ConfigReader& r, const std::string& n, C& c) {
            r.Int(n, &c.port, -1, 65535);
            if (c.port == -1) c.port = 59208;  // msprobe's "unset"; its documented example port
          },
          [](const C& c) { return absl::StrCat(c.port); },
          "port to listen on; `0` picks a free one (tests); msprobe's `-1` means the default")
          .Flag("port"),
      K::IndexList(
          "run_ut.rank_list", [](C& c) { return &c.service.rank_list; },
          "ranks whose calls are checked; other ranks' streams are refused (`PERMISSION_DENIED`)")
          .DocsDefault("`[]` = every rank")
          .Flag("rank_list"),
      K::Custom(
          "run_ut.tls_path", KeyKind::kString,
          [](common::ConfigReader& r, const std::string& n, C& c) {
            common::config_internal::ReadTlsPath(r, n, &c.tls_path, &c.parity.plaintext);
          },
          [](const C& c) {
            return common::config_internal::ShowTlsPath(c.tls_path, c.parity.plaintext);
          },
          "folder with `server.crt`, `server.key`, and `ca.crt` to require client certificates "
          "(mutual TLS); `\"\"`: plaintext, as in msprobe, with a warning")
          .DocsDefault("`\"./\"` (msprobe's default)")
          .Flag("tls_path"),
      K::Ignored("run_ut.precision",
                 "not an msprobe key (its RunUTConfig, msprobe/pytorch/pt_config.py, has none; "
                 "the 14 decimals of its CSVs come from api_accuracy_checker/config.yaml): "
                 "Parity always writes 14 decimals"),
      K::String(
          "parity.output_dir", [](C& c) { return &c.check.output_dir; },
          "where the CSV files and the JSON-lines record go")
          .Flag("output_dir"),
      K::String(
          "parity.metrics_host", [](C& c) { return &c.parity.metrics_host; },
          "address of the Prometheus `/metrics` endpoint")
          .Flag("metrics_host"),
      K::Int(
          "parity.metrics_port", [](C& c) { return &c.parity.metrics_port; }, -1, 65535,
          "its port; `-1` turns it off, `0` picks a free one")
          .Flag("metrics_port"),
      K::Int(
          "parity.workers", [](C& c) { return &c.parity.workers; }, 0, 1024,
          "replay workers; auto: half the cores, 1 to 4, and with a CUDA bench at least 2 per GPU "
          "(up to the cores): [deploy.md](deploy.md#gpu-hosts)")
          .DocsDefault("`0` = auto")
          .Flag("workers"),
      K::Int(
          "parity.intra_op_threads", [](C& c) { return &c.parity.intra_op_threads; }, 0, 1024,
          "libtorch's threads for one replayed op (process-wide); auto: libtorch's own choice "
          "(`torch.get_num_threads()`), but at most the cores divided among the workers, at least "
          "1, so that the workers' replays together do not oversubscribe the host. A server "
          "sharing the training's cores does best with one per worker and a worker per core, at "
          "nice 19 ([deploy.md](deploy.md#a-server-on-the-trainings-host))")
          .DocsDefault("`0` = auto")
          .Flag("intra_op_threads"),
      K::Int(
          "parity.queue_max_calls", [](C& c) { return &c.parity.queue_max_calls; }, 1, 1 << 20,
          "calls the work queue between the network and the workers may hold; when full, reading "
          "slows down and gRPC flow control pushes back on the agents")
          .Flag("queue_max_calls"),
      K::Bytes(
          "parity.queue_max_bytes", [](C& c) { return &c.parity.queue_max_bytes; },
          "bytes that queue may hold")
          .Flag("queue_max_bytes"),
      K::String(
          "parity.bench_device", [](C& c) { return &c.check.checker.bench_device; },
          "`\"auto\"` (every GPU when there are any, else the CPU), `\"cpu\"`, `\"cuda\"` (every "
          "GPU), `\"cuda:N\"`, or a list of GPUs `\"cuda:0,cuda:2\"`; workers take the GPUs in "
          "turn; on CUDA the bench runs without TF32 ([deploy.md](deploy.md#gpu-hosts)). A device "
          "that is absent, named twice, or the CPU listed with GPUs is an error at start")
          .Flag("bench_device"),
      K::String(
          "parity.standards_file", [](C& c) { return &c.parity.standards_file; },
          "API → standard table and per-dtype thresholds")
          .DocsDefault("built in")
          .Flag("standards_file"),
      K::Bool(
          "parity.npu_reference", [](C& c) { return &c.parity.npu_reference; },
          "load `libparity_npu_reference.so`, the references of torch_npu's fused operators "
          "([operators.md](operators.md))")
          .Flag("npu_reference"),
      K::StringList(
          "parity.reference_libraries", [](C& c) { return &c.parity.reference_libraries; },
          "more reference operator libraries (`.so` paths) to load at start: your own operators "
          "([operators.md](operators.md#your-own-operators)); one that cannot load stops the "
          "server")
          .DocsType("list")
          .Flag("reference_libraries"),
      K::String(
          "parity.operator_catalogue", [](C& c) { return &c.parity.operator_catalogue; },
          "a [catalogue file](operators.md#the-operator-catalogue) adding your own operators to "
          "the built-in catalogue (give the agents the same file); read before the standards file, "
          "which may then list your random ops under `random_property`. One that does not parse, "
          "or classifies a built-in operator differently, stops the server")
          .Flag("operator_catalogue"),
      K::Bool(
          "parity.golden", [](C& c) { return &c.check.checker.golden; },
          "compute the float64 golden (three-way standards)")
          .Flag("golden"),
      K::EnumChoice(
          "parity.golden_device", [](C& c) { return &c.check.checker.golden_device; },
          GoldenDevices(),
          "where the golden runs: `\"auto\"` on the worker's GPU with a CUDA bench (an op the GPU "
          "cannot run in float64 falls back to the CPU, and stays there), else the CPU; `\"cpu\"` "
          "always on the host")
          .Flag("golden_device"),
      K::EnumChoice(
          "parity.random_checks", [](C& c) { return &c.check.checker.random_checks; },
          RandomCheckModes(),
          "random ops (dropout, randn, randperm, …): `auto` replays them from the training's "
          "generator state when the bench has a generator of that kind and the same libtorch, else "
          "judges them by the `random_property` standard; `statistical` always judges them by "
          "properties; `skip` answers `SKIP` ([results.md](results.md#random-operators))")
          .DocsType("choice")
          .DocsDefault("`auto`")
          .Flag("random_checks"),
      K::Double(
          "parity.random_false_alarm", [](C& c) { return &c.check.checker.random_false_alarm; },
          1e-12, 0.01,
          "the `random_property` standard's false-alarm probability per call (1e-12 to 0.01)")
          .Flag("random_false_alarm"),
      K::Bool(
          "parity.replay", [](C& c) { return &c.parity.replay; },
          "`false`: receive and decode calls but answer every one `SKIP` (connectivity tests, "
          "measuring the agent and transport alone; no result files)")
          .Flag("replay"),
      K::Bool(
          "parity.save_error_data", [](C& c) { return &c.check.save_error_data; },
          "save the error data of calls judged error (msprobe's `-save_error_data`, on by default "
          "here)")
          .Flag("save_error_data"),
      K::Bytes(
          "parity.error_data_max_bytes", [](C& c) { return &c.check.error_data.max_bytes; },
          "error data of one server run; past it, calls are counted "
          "(`parity_server_error_data_total{outcome=\"over_budget\"}`) and logged once, not saved")
          .Flag("error_data_max_bytes"),
      K::Int(
          "parity.error_data_per_op", [](C& c) { return &c.check.error_data.max_per_op; }, 0,
          1 << 30,
          "calls judged error saved per operator and overload (the first ones); `0` = no limit")
          .Flag("error_data_per_op"),
      K::Bool(
          "parity.plaintext", [](C& c) { return &c.parity.plaintext; },
          "accept unencrypted connections")
          .Flag("plaintext"),
      K::String(
          "parity.tls_key_password_file", [](C& c) { return &c.parity.tls_key_password_file; },
          "file whose first line is the passphrase of an encrypted `server.key`; empty: "
          "`$PARITY_TLS_KEY_PASSWORD`")
          .Flag("tls_key_password_file"),
      K::Bool(
          "parity.allow_plaintext_non_loopback",
          [](C& c) { return &c.parity.allow_plaintext_non_loopback; },
          "in plaintext, allow binding a non-loopback address")
          .Flag("allow_plaintext_non_loopback"),
      K::Bytes(
          "parity.max_message_bytes", [](C& c) { return &c.parity.max_message_bytes; },
          "largest message accepted; advertised to agents, which chunk larger tensors")
          .Flag("max_message_bytes"),
      K::Int(
          "parity.max_streams", [](C& c) { return &c.service.max_streams; }, 1, 1 << 20,
          "concurrent agent streams; more are refused with `RESOURCE_EXHAUSTED`")
          .Flag("max_streams"),
      K::Bytes(
          "parity.max_partial_blob_bytes", [](C& c) { return &c.service.max_partial_blob_bytes; },
          "bytes all streams together may hold in chunked tensors whose call has not arrived yet; "
          "a chunk over it ends its stream with `RESOURCE_EXHAUSTED` (the agent reconnects)")
          .Flag("max_partial_blob_bytes"),
      K::Bytes(
          "parity.kept_blob_bytes", [](C& c) { return &c.parity.kept_blob_bytes; },
          "per stream: tensor payloads the server keeps for the agent to name again "
          "(`parity.reuse_bytes`); advertised in `ServerInfo.kept_blob_bytes`. A server's memory "
          "for them is at most `parity.max_kept_blob_bytes`. `0`: agents send every tensor in full")
          .Flag("kept_blob_bytes"),
      K::Bytes(
          "parity.max_kept_blob_bytes", [](C& c) { return &c.service.max_kept_blob_bytes; },
          "the kept payloads of all streams together: a stream is offered `kept_blob_bytes` while "
          "the open streams' offers stay within this, then what is left (down to `0`); an offer is "
          "returned when its stream ends")
          .Flag("max_kept_blob_bytes"),
      K::Int(
          "parity.verdict_hold_ms", [](C& c) { return &c.service.verdict_hold_ms; }, 0, 1000,
          "to an agent that takes `VerdictBatch` (`Hello.accepts_batches`): while later calls of "
          "its stream are still being checked, ready verdicts wait up to this long, from the first "
          "of them, to go out together (at most 64 verdicts and 1 MiB a batch; a full batch goes "
          "at once); the stream's last verdicts, and those of a worker that keeps up with the "
          "calls, go at once. Fewer messages when the workers are behind (exhaustive Llama on 2 "
          "cores: 730 messages for 10,540 verdicts instead of 9,427, step time −9%; "
          "[performance.md](performance.md)); a verdict arrives at most this much later. `0`: each "
          "goes as soon as the write before it ends. 0 to 1000")
          .Flag("verdict_hold_ms"),
      K::Int(
          "parity.replica_wait_ms", [](C& c) { return &c.replicas.wait_ms; }, 100, 600000,
          "how long the first `ReplicaReport` of a process group's tensors waits for the "
          "group's other ranks ([replicas.md](replicas.md)): the slowest rank's lag behind the "
          "fastest, and its network. Past it the reports that came are compared and the ranks "
          "that did not report are counted (`parity_server_replica_missing_total`), not blamed. "
          "100 to 600000")
          .Flag("replica_wait_ms"),
      K::Bytes(
          "parity.max_unsent_verdict_bytes",
          [](C& c) { return &c.service.max_unsent_verdict_bytes; },
          "per stream: verdicts checked but not yet written to the agent (its reader behind, or "
          "gone without closing). Past this the server stops reading the stream's calls until the "
          "agent reads its verdicts (back-pressure, as when the workers are behind): a stream's "
          "memory stays bounded whatever its client does. A client must read its verdicts while "
          "it sends (the agent does, on its own thread); one that sends everything before reading "
          "anything waits here. Streams waiting so: `parity_server_streams_waiting_for_reader`")
          .Flag("max_unsent_verdict_bytes"),
      K::Int(
          "parity.shutdown_grace_ms", [](C& c) { return &c.parity.shutdown_grace_ms; }, 0, 3600000,
          "on SIGTERM/SIGINT, how long open streams may take to finish before they are cancelled; "
          "the process exits at most 10 s after that in any case")
          .Flag("shutdown_grace_ms"),
      K::Choice(
          "parity.log_level", [](C& c) { return &c.parity.log_level; }, LogLevels(),
          "server log verbosity")
          .Flag("log_level"),
      K::Bytes(
          "parity.limits.max_tensor_bytes", [](C& c) { return &c.parity.limits.max_tensor_bytes; },
          "one tensor's payload")
          .Flag("max_tensor_bytes"),
      K::Int(
          "parity.limits.max_tensor_numel", [](C& c) { return &c.parity.limits.max_tensor_numel; },
          1, int64_t{1} << 40, "one tensor's elements")
          .DocsDefault("`2^30`")
          .Flag("max_tensor_numel"),
      K::Bytes(
          "parity.limits.max_call_bytes", [](C& c) { return &c.parity.limits.max_call_bytes; },
          "all tensors of one call (also the chunked tensors one stream may hold before their "
          "call)")
          .Flag("max_call_bytes"),
      K::Int(
          "parity.limits.max_dims", [](C& c) { return &c.parity.limits.max_dims; }, 1, 64,
          "tensor rank")
          .Flag("max_dims"),
      K::Int(
          "parity.limits.max_depth", [](C& c) { return &c.parity.limits.max_depth; }, 1, 64,
          "nesting of lists")
          .Flag("max_depth"),
      K::Int(
          "parity.limits.max_list_length", [](C& c) { return &c.parity.limits.max_list_length; }, 1,
          1 << 24, "items in one list")
          .Flag("max_list_length"),
      K::Int(
          "parity.limits.max_string_bytes", [](C& c) { return &c.parity.limits.max_string_bytes; },
          1, 1 << 26, "one string argument")
          .Flag("max_string_bytes"),
  });
  return *table;
}

}  // namespace parity::server
