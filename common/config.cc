#include "common/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config_reader.h"

namespace parity::common {
namespace {

constexpr char kNfsHelp[] =
    "shared-storage (NFS) mode is not supported: Parity streams calls over gRPC. Remove nfs_path "
    "(or set it to \"\") and set host and port to the benchmark server";

// Parses the document; a syntax error becomes an INVALID_ARGUMENT naming line and column.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source) {
  try {
    nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end());
    if (!doc.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the top level must be a JSON object, got ", Quote(doc)));
    }
    return doc;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into line:column.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const std::size_t pos = what.find("syntax error");
    if (pos != std::string::npos) what = what.substr(pos);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ":", col, ": invalid JSON: ", what));
  }
}

absl::Status Summarise(const ConfigIssues& issues, absl::string_view source) {
  if (issues.errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": ", issues.errors.size(), " error(s):\n  ", absl::StrJoin(issues.errors, "\n  ")));
}

void ReadDecodeLimits(ConfigReader& r, DecodeLimits* l) {
  r.Bytes("max_tensor_bytes", &l->max_tensor_bytes);
  int64_t numel = static_cast<int64_t>(l->max_tensor_numel);
  r.Int("max_tensor_numel", &numel, 1, int64_t{1} << 40);
  l->max_tensor_numel = static_cast<uint64_t>(numel);
  r.Bytes("max_call_bytes", &l->max_call_bytes);
  r.UInt32("max_dims", &l->max_dims, 1, 64);
  r.UInt32("max_depth", &l->max_depth, 1, 64);
  r.UInt32("max_list_length", &l->max_list_length, 1, 1u << 24);
  r.UInt32("max_string_bytes", &l->max_string_bytes, 1, 1u << 26);
}

std::string JoinInts(const std::vector<int64_t>& v) {
  return v.empty() ? "[] (all)" : absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}
std::string JoinStrings(const std::vector<std::string>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    uint64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30},   {"tib", 1ull << 40},
      {"kb", 1000ull},     {"mb", 1000000ull},  {"gb", 1000000000ull}, {"b", 1ull},
  };
  uint64_t factor = 1;
  for (const Unit& u : kUnits) {
    const std::size_t n = std::strlen(u.suffix);
    if (s.size() > n && s.compare(s.size() - n, n, u.suffix) == 0) {
      factor = u.factor;
      s = std::string(absl::StripAsciiWhitespace(s.substr(0, s.size() - n)));
      break;
    }
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(s, &value) || (value != 0 && factor > UINT64_MAX / value)) {
    return absl::InvalidArgumentError(absl::StrCat("not a byte size: \"", text, "\""));
  }
  return value * factor;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat(path, ": ", why));
    return absl::UnavailableError(absl::StrCat(path, ": ", why));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- agent -------------------------------------------------------------------------------------

absl::Status ValidateAgentConfig(const AgentConfig& c) {
  std::vector<std::string> errors;
  if (c.host.empty()) {
    errors.push_back("tensor.host: the benchmark server's address is required");
  } else if (c.host.find_first_of(" \t\n") != std::string::npos) {
    errors.push_back(absl::StrCat("tensor.host: not a host name or address: \"", c.host, "\""));
  }
  if (c.port < 1 || c.port > 65535) {
    errors.push_back(absl::StrCat("tensor.port: must be between 1 and 65535, got ", c.port));
  }
  if (c.tls_path.empty() && !c.parity.plaintext) {
    errors.push_back(
        "tensor.tls_path: TLS is required. Point tls_path at a folder holding ca.crt (and "
        "client.crt, client.key for mutual TLS), or set parity.plaintext to true to send "
        "unencrypted (msprobe took an empty tls_path to mean plaintext; Parity asks explicitly)");
  }
  if (!c.scope.empty() && !c.list.empty()) {
    errors.push_back("tensor.scope, tensor.list: set one of them, not both");
  }
  if (!c.scope.empty() && c.scope.size() != 2) {
    errors.push_back(
        absl::StrCat("tensor.scope: expected a range of two API names [start, end], got ",
                     c.scope.size(), " names"));
  }
  if (c.parity.reconnect_initial_ms > c.parity.reconnect_max_ms) {
    errors.push_back("parity.reconnect_initial_ms: must not exceed parity.reconnect_max_ms");
  }
  if (c.parity.max_inline_tensor_bytes > c.parity.max_tensor_bytes) {
    errors.push_back("parity.max_inline_tensor_bytes: must not exceed parity.max_tensor_bytes");
  }
  if (c.parity.queue_max_bytes == 0 || c.parity.queue_max_calls == 0) {
    errors.push_back("parity.queue_max_bytes, parity.queue_max_calls: must be positive");
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n  "));
}

absl::StatusOr<Parsed<AgentConfig>> ParseAgentConfig(absl::string_view json_text,
                                                     absl::string_view source) {
  absl::StatusOr<nlohmann::json> doc = ParseJson(json_text, source);
  if (!doc.ok()) return doc.status();
  Parsed<AgentConfig> out;
  AgentConfig& c = out.config;
  ConfigIssues issues;
  ConfigReader top(&*doc, "", &issues);

  top.String("task", &c.task);
  if (c.task == "run_ut") {
    top.Error("task",
              "\"run_ut\" is the benchmark server's task; the agent's config needs "
              "\"task\": \"tensor\" with a \"tensor\" section");
  } else if (c.task != "tensor") {
    top.Error("task", absl::StrCat("Parity's agent runs msprobe's \"tensor\" task with "
                                   "online_run_ut; got \"",
                                   c.task, "\""));
  }
  top.String("dump_path", &c.dump_path);
  top.Choice("level", &c.level, {"L0", "L1", "L2", "mix"});
  if (c.level != "L1") {
    top.Warning("level",
                "Parity checks every top-level aten operator (msprobe's L1) whatever "
                "the level; module paths are recorded when the model is given to "
                "start()");
  }
  top.IndexList("rank", &c.rank);
  top.IndexList("step", &c.step);
  top.Int("seed", &c.seed, 0, INT64_MAX);
  top.Bool("is_deterministic", &c.is_deterministic);
  for (const char* k : {"enable_dataloader", "acl_config", "framework", "async_dump"}) {
    top.Ignored(k, "msprobe dump option with no meaning for online checking");
  }
  for (const char* k :
       {"statistics", "overflow_check", "free_benchmark", "run_ut", "grad_probe", "structure"}) {
    top.Accepted(k);  // sections of other msprobe tasks may share the file
  }

  ConfigReader t = top.Section("tensor");
  if (!top.Has("tensor")) {
    top.Error("tensor", "section missing: it holds host, port and tls_path");
  }
  t.StringList("scope", &c.scope);
  t.StringList("list", &c.list);
  c.online_run_ut = false;
  t.Bool("online_run_ut", &c.online_run_ut);
  if (!c.online_run_ut) {
    t.Warning("online_run_ut", "false or missing: Parity always checks online");
    c.online_run_ut = true;
  }
  std::string nfs;
  t.String("nfs_path", &nfs);
  if (!nfs.empty()) t.Error("nfs_path", kNfsHelp);
  t.String("host", &c.host);
  t.Int("port", &c.port, -1, 65535);
  t.String("tls_path", &c.tls_path);
  bool recompute = false;
  t.Bool("online_run_ut_recompute", &recompute);
  if (recompute) c.parity.capture_backward = false;
  t.Ignored("data_mode", "Parity always captures inputs at entry and outputs at exit");
  t.Ignored("file_format", "Parity writes no dump files");
  t.Ignored("summary_mode", "Parity writes no dump files");
  t.Finish();

  ConfigReader p = top.Section("parity");
  AgentOptions& o = c.parity;
  p.Bytes("queue_max_bytes", &o.queue_max_bytes);
  p.UInt32("queue_max_calls", &o.queue_max_calls, 1, 1u << 24);
  std::string policy = o.policy == QueuePolicy::kDrop ? "drop" : "block";
  p.Choice("policy", &policy, {"drop", "block"});
  o.policy = policy == "block" ? QueuePolicy::kBlock : QueuePolicy::kDrop;
  p.UInt32("block_timeout_ms", &o.block_timeout_ms);
  p.UInt32("max_checks_per_signature", &o.max_checks_per_signature);
  std::string period = o.budget_period == BudgetPeriod::kRun ? "run" : "step";
  p.Choice("budget_period", &period, {"step", "run"});
  o.budget_period = period == "step" ? BudgetPeriod::kStep : BudgetPeriod::kRun;
  p.Bool("fail_fast", &o.fail_fast);
  p.Bool("plaintext", &o.plaintext);
  p.String("server_name", &o.server_name);
  p.UInt32("connect_timeout_ms", &o.connect_timeout_ms, 1);
  p.UInt32("reconnect_initial_ms", &o.reconnect_initial_ms, 1);
  p.UInt32("reconnect_max_ms", &o.reconnect_max_ms, 1);
  p.UInt32("flush_timeout_ms", &o.flush_timeout_ms);
  p.UInt32("stats_interval_ms", &o.stats_interval_ms, 1);
  p.Bytes("max_inline_tensor_bytes", &o.max_inline_tensor_bytes);
  p.Bytes("max_tensor_bytes", &o.max_tensor_bytes);
  p.Bool("checksum", &o.checksum);
  p.Bool("capture_backward", &o.capture_backward);
  p.StringList("white_list", &o.white_list);
  p.StringList("black_list", &o.black_list);
  p.String("run_id", &o.run_id);
  p.Choice("log_level", &o.log_level, {"debug", "info", "warning", "error"});
  p.Finish();
  top.Finish();

  if (issues.errors.empty()) {
    absl::Status v = ValidateAgentConfig(c);
    if (!v.ok()) issues.errors.push_back(std::string(v.message()));
  }
  if (absl::Status s = Summarise(issues, source); !s.ok()) return s;
  out.warnings = std::move(issues.warnings);
  return out;
}

// ---- server ------------------------------------------------------------------------------------

namespace {

// Checks that hold for any part of a server configuration. The choice between TLS and plaintext
// is checked once the file and the command line are merged (ValidateServerConfig), so a file
// may leave tls_path to a flag.
void CheckServerFields(const ServerConfig& c, std::vector<std::string>& errors) {
  if (c.port < 0 || c.port > 65535) {
    errors.push_back(absl::StrCat("run_ut.port: must be between 0 and 65535, got ", c.port));
  }
  if (c.parity.metrics_port < -1 || c.parity.metrics_port > 65535) {
    errors.push_back(absl::StrCat("parity.metrics_port: must be -1 (off) or 0..65535, got ",
                                  c.parity.metrics_port));
  }
  if (c.parity.max_message_bytes < 4096 || c.parity.max_message_bytes > (uint64_t{1} << 31) - 1) {
    errors.push_back("parity.max_message_bytes: must be between 4KiB and 2GiB-1");
  }
  if (c.parity.queue_max_calls == 0) errors.push_back("parity.queue_max_calls: must be positive");
}

}  // namespace

absl::Status ValidateServerConfig(const ServerConfig& c) {
  std::vector<std::string> errors;
  CheckServerFields(c, errors);
  if (c.tls_path.empty() && !c.parity.plaintext) {
    errors.push_back(
        "run_ut.tls_path: TLS is required. Point tls_path (or --tls_path) at a folder holding "
        "server.crt and server.key (and ca.crt to require client certificates), or set "
        "parity.plaintext (--plaintext) to true (msprobe took an empty tls_path to mean "
        "plaintext; Parity asks explicitly)");
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n  "));
}

absl::StatusOr<Parsed<ServerConfig>> ParseServerConfig(absl::string_view json_text,
                                                       absl::string_view source) {
  absl::StatusOr<nlohmann::json> doc = ParseJson(json_text, source);
  if (!doc.ok()) return doc.status();
  Parsed<ServerConfig> out;
  ServerConfig& c = out.config;
  ConfigIssues issues;
  ConfigReader top(&*doc, "", &issues);
  top.String("task", &c.task);
  if (c.task == "tensor") {
    top.Error("task",
              "\"tensor\" is the agent's task; the server's config needs "
              "\"task\": \"run_ut\" with a \"run_ut\" section");
  } else if (c.task != "run_ut") {
    top.Error("task",
              absl::StrCat("the server runs msprobe's \"run_ut\" task, got \"", c.task, "\""));
  }
  for (const char* k : {"dump_path", "rank", "step", "level", "seed", "is_deterministic",
                        "enable_dataloader", "acl_config", "framework", "tensor", "statistics",
                        "overflow_check", "free_benchmark", "grad_probe", "structure"}) {
    top.Accepted(k);  // the agent's keys may share the file
  }

  ConfigReader r = top.Section("run_ut");
  r.StringList("white_list", &c.white_list);
  r.StringList("black_list", &c.black_list);
  r.String("error_data_path", &c.error_data_path);
  r.Bool("is_online", &c.is_online);
  if (!c.is_online) {
    r.Warning("is_online", "false: Parity's server only checks online (streamed) calls");
  }
  std::string nfs;
  r.String("nfs_path", &nfs);
  if (!nfs.empty()) r.Error("nfs_path", kNfsHelp);
  r.String("host", &c.host);
  r.Int("port", &c.port, -1, 65535);
  if (c.port == -1) c.port = 59208;  // msprobe's "unset"; its documented example port
  r.IndexList("rank_list", &c.rank_list);
  r.String("tls_path", &c.tls_path);
  r.Ignored("precision", "Parity always writes 14 decimals, like msprobe's default");
  r.Finish();

  ConfigReader p = top.Section("parity");
  ServerOptions& o = c.parity;
  p.String("output_dir", &o.output_dir);
  p.String("metrics_host", &o.metrics_host);
  p.Int("metrics_port", &o.metrics_port, -1, 65535);
  p.UInt32("workers", &o.workers, 0, 1024);
  p.UInt32("queue_max_calls", &o.queue_max_calls, 1, 1u << 20);
  p.Bytes("queue_max_bytes", &o.queue_max_bytes);
  p.String("bench_device", &o.bench_device);
  p.String("standards_file", &o.standards_file);
  p.Bool("golden", &o.golden);
  p.Bool("plaintext", &o.plaintext);
  p.Bool("allow_plaintext_non_loopback", &o.allow_plaintext_non_loopback);
  p.Bytes("max_message_bytes", &o.max_message_bytes);
  p.UInt32("max_streams", &o.max_streams, 1, 1u << 20);
  p.Bytes("max_partial_blob_bytes", &o.max_partial_blob_bytes);
  p.UInt32("shutdown_grace_ms", &o.shutdown_grace_ms, 0, 3600000);
  ConfigReader lim = p.Section("limits");
  ReadDecodeLimits(lim, &o.limits);
  lim.Finish();
  p.Finish();
  top.Finish();

  if (issues.errors.empty()) CheckServerFields(c, issues.errors);
  if (absl::Status s = Summarise(issues, source); !s.ok()) return s;
  out.warnings = std::move(issues.warnings);
  return out;
}

absl::StatusOr<Parsed<AgentConfig>> LoadAgentConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseAgentConfig(*text, path);
}

absl::StatusOr<Parsed<ServerConfig>> LoadServerConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseServerConfig(*text, path);
}

std::string DescribeAgentConfig(const AgentConfig& c) {
  const AgentOptions& o = c.parity;
  std::vector<std::string> l = {
      absl::StrCat("tensor.host = ", c.host),
      absl::StrCat("tensor.port = ", c.port),
      absl::StrCat("tensor.tls_path = ", o.plaintext ? "(plaintext)" : c.tls_path),
      absl::StrCat("rank = ", JoinInts(c.rank)),
      absl::StrCat("step = ", JoinInts(c.step)),
      absl::StrCat("tensor.scope = ", JoinStrings(c.scope)),
      absl::StrCat("tensor.list = ", JoinStrings(c.list)),
      absl::StrCat("parity.policy = ", o.policy == QueuePolicy::kDrop ? "drop" : "block"),
      absl::StrCat("parity.queue_max_calls = ", o.queue_max_calls),
      absl::StrCat("parity.queue_max_bytes = ", o.queue_max_bytes),
      absl::StrCat("parity.max_checks_per_signature = ", o.max_checks_per_signature,
                   o.max_checks_per_signature == 0 ? " (all)" : ""),
      absl::StrCat("parity.budget_period = ",
                   o.budget_period == BudgetPeriod::kRun ? "run" : "step"),
      absl::StrCat("parity.capture_backward = ", o.capture_backward ? "true" : "false"),
      absl::StrCat("parity.fail_fast = ", o.fail_fast ? "true" : "false"),
      absl::StrCat("parity.white_list = ", JoinStrings(o.white_list)),
      absl::StrCat("parity.black_list = ", JoinStrings(o.black_list)),
      absl::StrCat("parity.max_inline_tensor_bytes = ", o.max_inline_tensor_bytes),
      absl::StrCat("parity.max_tensor_bytes = ", o.max_tensor_bytes),
  };
  return absl::StrJoin(l, "\n");
}

std::string DescribeServerConfig(const ServerConfig& c) {
  const ServerOptions& o = c.parity;
  std::vector<std::string> l = {
      absl::StrCat("run_ut.host = ", c.host.empty() ? "(default)" : c.host),
      absl::StrCat("run_ut.port = ", c.port),
      absl::StrCat("run_ut.tls_path = ", o.plaintext ? "(plaintext)" : c.tls_path),
      absl::StrCat("run_ut.rank_list = ", JoinInts(c.rank_list)),
      absl::StrCat("run_ut.white_list = ", JoinStrings(c.white_list)),
      absl::StrCat("run_ut.black_list = ", JoinStrings(c.black_list)),
      absl::StrCat("parity.output_dir = ", o.output_dir),
      absl::StrCat("parity.metrics = ",
                   o.metrics_port < 0 ? "off" : absl::StrCat(o.metrics_host, ":", o.metrics_port)),
      absl::StrCat("parity.bench_device = ", o.bench_device),
      absl::StrCat("parity.workers = ", o.workers == 0 ? "auto" : absl::StrCat(o.workers)),
      absl::StrCat("parity.queue_max_calls = ", o.queue_max_calls),
      absl::StrCat("parity.queue_max_bytes = ", o.queue_max_bytes),
      absl::StrCat("parity.max_message_bytes = ", o.max_message_bytes),
      absl::StrCat("parity.golden = ", o.golden ? "true" : "false"),
  };
  return absl::StrJoin(l, "\n");
}

}  // namespace parity::common
