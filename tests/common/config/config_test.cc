#include "common/config/config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::common {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// msprobe's documented online example for the NPU side, with TLS.
constexpr char kMsprobeAgent[] = R"({
  "task": "tensor", "dump_path": "./dump_path", "rank": [0], "step": [0], "level": "L1",
  "tensor": {"scope": [], "list": [], "online_run_ut": true, "nfs_path": "",
             "host": "10.0.0.7", "port": 59208, "tls_path": "./certs"}
})";

TEST(AgentConfigTest, AcceptsMsprobeOnlineConfigAsIs) {
  auto parsed = ParseAgentConfig(kMsprobeAgent, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const AgentConfig& c = parsed->config;
  EXPECT_EQ(c.host, "10.0.0.7");
  EXPECT_EQ(c.port, 59208);
  EXPECT_EQ(c.tls_path, "./certs");
  EXPECT_THAT(c.rank, ElementsAre(0));
  EXPECT_THAT(c.step, ElementsAre(0));
  EXPECT_THAT(parsed->warnings, IsEmpty());
  // Parity's defaults where msprobe has nothing to say.
  // msprobe blocks (up to 60 s a call): so does Parity by default, 10 s, then sheds.
  EXPECT_EQ(c.parity.sender.policy, QueuePolicy::kBlock);
  EXPECT_EQ(c.parity.sender.block_timeout_ms, 10000u);
  EXPECT_EQ(c.parity.capture.max_checks_per_signature, 0u);
  EXPECT_FALSE(c.parity.link.plaintext);
}

TEST(AgentConfigTest, ReadsParitySectionAndRanges) {
  auto parsed = ParseAgentConfig(R"({
    "task": "tensor", "step": [0, "3-5"], "rank": ["0-1"],
    "tensor": {"online_run_ut": true, "host": "gpu-1", "port": 7000, "list": ["gelu"]},
    "parity": {"plaintext": true, "policy": "drop", "queue_max_bytes": "64MiB",
               "queue_max_calls": 16, "max_checks_per_signature": 2, "budget_period": "step",
               "fail_fast": true, "black_list": ["dropout"], "max_inline_tensor_bytes": 1024,
               "background_nice": 19, "batch_calls": 1}
  })");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const AgentConfig& c = parsed->config;
  EXPECT_THAT(c.step, ElementsAre(0, 3, 4, 5));
  EXPECT_THAT(c.rank, ElementsAre(0, 1));
  EXPECT_THAT(c.list, ElementsAre("gelu"));
  EXPECT_EQ(c.parity.sender.policy, QueuePolicy::kDrop);
  EXPECT_EQ(c.parity.sender.queue_max_bytes, 64u << 20);
  EXPECT_EQ(c.parity.sender.queue_max_calls, 16u);
  EXPECT_EQ(c.parity.capture.max_checks_per_signature, 2u);
  EXPECT_EQ(c.parity.capture.budget_period, BudgetPeriod::kStep);
  EXPECT_TRUE(c.parity.fail_fast);
  EXPECT_THAT(c.parity.black_list, ElementsAre("dropout"));
  EXPECT_EQ(c.parity.link.max_inline_tensor_bytes, 1024u);
  EXPECT_EQ(c.parity.link.background_nice, 19u);
  EXPECT_EQ(c.parity.sender.batch_calls, 1u);
  // A nice value past Linux's range is refused, naming the key and the range.
  auto bad = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1}, "parity": {"plaintext": true, "background_nice": 20,
      "batch_calls": 0}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("parity.background_nice: must be between 0 and 19, got 20"));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("parity.batch_calls: must be between 1 and 4096, got 0"));
}

TEST(AgentConfigTest, StatsIntervalIsReadAndZeroIsRefused) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 7000}, "parity": {"plaintext": true, "stats_interval_ms": 250}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.parity.sender.stats_interval_ms, 250u);
  // 0 would send the counters on every turn of the sender's loop.
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 7000}, "parity": {"plaintext": true, "stats_interval_ms": 0}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("parity.stats_interval_ms: must be between 1 and 4294967295, got 0"));
}

TEST(AgentConfigTest, WrongTypeNamesKeyAndValue) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": "abc", "tls_path": "c"}})",
                                 "config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("tensor.port: expected an integer, got \"abc\""));
  EXPECT_THAT(parsed.status().message(), HasSubstr("config.json"));
}

TEST(AgentConfigTest, ReportsEveryErrorAtOnce) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "step": [-1], "tensor": {
      "online_run_ut": "yes", "host": "h", "port": 70000, "tls_path": "c"},
      "parity": {"policy": "wait", "queue_max_bytes": "lots"}})");
  ASSERT_FALSE(parsed.ok());
  const std::string m(parsed.status().message());
  EXPECT_THAT(m, HasSubstr("5 error(s)"));
  EXPECT_THAT(m, HasSubstr("step[0]: expected a non-negative integer or a range \"a-b\", got -1"));
  EXPECT_THAT(m, HasSubstr("tensor.online_run_ut: expected true or false, got \"yes\""));
  EXPECT_THAT(m, HasSubstr("tensor.port: must be between 1 and 65535, got 70000"));
  EXPECT_THAT(m, HasSubstr("parity.policy: expected one of \"drop\", \"block\", got \"wait\""));
  EXPECT_THAT(m, HasSubstr("parity.queue_max_bytes: expected a byte size"));
}

// msprobe's seed range: seed_all accepts [0, 2^32-1], and so does the config.
TEST(AgentConfigTest, SeedIsInMsprobesRange) {
  const std::string base = R"({"task": "tensor", "tensor": {"online_run_ut": true, "host": "h",
      "port": 1, "tls_path": "c"}, "seed": )";
  EXPECT_TRUE(ParseAgentConfig(base + "4294967295}").ok());
  auto parsed = ParseAgentConfig(base + "4294967296}");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("seed: must be between 0 and 4294967295, got 4294967296"));
  parsed = ParseAgentConfig(base + "-1}");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("seed: must be between 0 and 4294967295"));
}

// Names in the lists that select calls take every form common/naming/selection.h accepts; a
// malformed one is an error naming its key.
TEST(AgentConfigTest, MalformedNamesInFiltersNameTheirKey) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1, "tls_path": "c", "scope": ["Functional.linear.0.forward", ""]},
      "parity": {"white_list": ["aten::add.Tensor.3.sideways"], "black_list": ["cross_entropy"]}})");
  ASSERT_FALSE(parsed.ok());
  const std::string m(parsed.status().message());
  EXPECT_THAT(m, HasSubstr("tensor.scope: an empty name"));
  EXPECT_THAT(m, HasSubstr("parity.white_list: \"aten::add.Tensor.3.sideways\": unexpected"));
  EXPECT_THAT(m, Not(HasSubstr("black_list")));
  EXPECT_TRUE(ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1, "tls_path": "c", "list": ["Functional.linear.0.for", "conv*"]},
      "parity": {"white_list": ["Torch.matmul", "aten::add.Tensor", "NPU.npu_rms_norm"]}})")
                  .ok())
      << "list entries may be plain substrings";
}

// parity.replicas takes the three kinds docs/replicas.md names; check_calls false needs it.
TEST(AgentConfigTest, ReplicasTakeTheirThreeKindsAndCheckCallsOffNeedsThem) {
  const std::string base = R"({"task": "tensor", "tensor": {"online_run_ut": true, "host": "h",
      "port": 1, "tls_path": "c"}, "parity": )";
  auto ok = ParseAgentConfig(
      base + R"({"replicas": ["gradients", "parameters", "collectives"], "check_calls": false}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->config.parity.replicas.size(), 3u);
  EXPECT_FALSE(ok->config.parity.capture.check_calls);
  auto parsed = ParseAgentConfig(base + R"({"replicas": ["gradients", "weights"]}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("parity.replicas: \"weights\""));
  parsed = ParseAgentConfig(base + R"({"replicas": "gradients"}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("parity.replicas"));
  parsed = ParseAgentConfig(base + R"({"check_calls": false}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(
      parsed.status().message(),
      HasSubstr("parity.check_calls: false with parity.replicas empty would check nothing"));
}

TEST(AgentConfigTest, NfsPathIsAClearError) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "nfs_path": "/nfs/data", "host": "h", "port": 1, "tls_path": "c"}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              AllOf(HasSubstr("tensor.nfs_path"), HasSubstr("not supported"),
                    HasSubstr("set host and port")));
}

// msprobe 8.1.1's documented online run_ut configs, verbatim (its docs' NPU-side and GPU-side
// examples, and the shared-storage variant): an empty tls_path is msprobe's plaintext, which
// Parity takes the same way, warning loudly; a missing one is msprobe's default "./".
constexpr char kMsprobeNpuExample[] =
    R"({"task":"tensor","dump_path":"./dump_path","rank":[0],"step":[0],"level":"L1","tensor":)"
    R"({"scope":[],"list":[],"online_run_ut":true,"nfs_path":"","host":"xx.xx.xx.x",)"
    R"("port":59208,"tls_path":""}})";
TEST(AgentConfigTest, MsprobesEmptyTlsPathIsPlaintextWithALoudWarning) {
  auto parsed = ParseAgentConfig(kMsprobeNpuExample);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->config.parity.link.plaintext);
  EXPECT_EQ(parsed->config.port, 59208);
  EXPECT_THAT(parsed->warnings,
              Contains(AllOf(HasSubstr("tensor.tls_path"), HasSubstr("plaintext"),
                             HasSubstr("unencrypted"), HasSubstr("parity.plaintext"))));
  // Said explicitly, plaintext needs no warning about tls_path.
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1}, "parity": {"plaintext": true}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->warnings, Not(Contains(HasSubstr("tensor.tls_path"))));
}

TEST(AgentConfigTest, AMissingTlsPathIsMsprobesDefaultTheCurrentFolder) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.tls_path, "./");
  EXPECT_FALSE(parsed->config.parity.link.plaintext);
}

TEST(AgentConfigTest, MsprobesSharedStorageExampleSaysWhatToDoInstead) {
  // The same example in msprobe's shared-storage form: nfs_path set, host "", port -1.
  auto parsed = ParseAgentConfig(
      R"({"task":"tensor","dump_path":"./dump_path","rank":[0],"step":[0],"level":"L1",)"
      R"("tensor":{"scope":[],"list":[],"online_run_ut":true,"nfs_path":"/nfs/xxx/data",)"
      R"("host":"","port":-1,"tls_path":""}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              AllOf(HasSubstr("tensor.nfs_path"), HasSubstr("not supported"),
                    HasSubstr("set host and port to the benchmark server")));
}

TEST(AgentConfigTest, EveryMsprobeLevelAndTopLevelPrecisionAreAccepted) {
  for (const char* level : {"L0", "L1", "L2", "mix", "debug"}) {
    auto parsed = ParseAgentConfig(absl::StrCat(R"({"task": "tensor", "level": ")", level,
                                                R"(", "precision": 14, "tensor": {
        "online_run_ut": true, "host": "h", "port": 1, "tls_path": "c"}})"));
    ASSERT_TRUE(parsed.ok()) << level << ": " << parsed.status();
    EXPECT_THAT(parsed->warnings, Not(Contains(HasSubstr("precision")))) << level;
  }
}

TEST(AgentConfigTest, UnknownAndIgnoredKeysAreWarnings) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "level": "mix", "colour": "red",
      "tensor": {"online_run_ut": true, "host": "h", "port": 1, "tls_path": "c",
                 "data_mode": ["all"], "prot": 5},
      "parity": {"fail_fats": true}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  // Each with the line the key is on.
  EXPECT_THAT(parsed->warnings, Contains("colour: unknown key, ignored (line 1)"));
  EXPECT_THAT(parsed->warnings, Contains("tensor.prot: unknown key, ignored (line 3)"));
  EXPECT_THAT(parsed->warnings, Contains("parity.fail_fats: unknown key, ignored (line 4)"));
  EXPECT_THAT(parsed->warnings, Contains(HasSubstr("tensor.data_mode: ignored")));
  EXPECT_THAT(parsed->warnings, Contains(HasSubstr("level: Parity checks every")));
}

TEST(AgentConfigTest, RejectsServerTaskMissingSectionAndBadStructure) {
  auto parsed = ParseAgentConfig(R"({"task": "run_ut", "run_ut": {"port": 59208}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("\"run_ut\" is the benchmark server's task"));
  parsed = ParseAgentConfig(R"({"task": "tensor"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("tensor: section missing"));
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": [1]})");
  EXPECT_THAT(parsed.status().message(), HasSubstr("tensor: expected an object, got list"));
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1, "tls_path": "c", "scope": ["a"], "list": ["b"]}})");
  EXPECT_THAT(parsed.status().message(), HasSubstr("set one of them, not both"));
}

// msprobe 26.x's names: acc_check is the server's task (its section may share the file), its
// new task sections and keys are accepted like the other dump options.
TEST(AgentConfigTest, Msprobe26sNamesAreKnown) {
  auto parsed = ParseAgentConfig(R"({"task": "acc_check", "acc_check": {}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("\"acc_check\" is the benchmark server's task"));
  parsed = ParseAgentConfig(R"({"task": "tensor", "extra_info": true, "acc_check": {},
      "diff_check": {}, "nan_check": {}, "tensor": {"online_run_ut": true, "host": "h",
      "port": 1, "bench_path": "./b"}, "parity": {"plaintext": true}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->warnings, Not(Contains(HasSubstr("unknown key"))));
}

TEST(AgentConfigTest, MalformedJsonNamesLineAndColumn) {
  auto parsed = ParseAgentConfig("{\n  \"task\": \"tensor\",\n  \"step\": [0,,]\n}", "cfg.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("cfg.json:3:"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("invalid JSON"));
  EXPECT_FALSE(ParseAgentConfig("[1, 2]").ok());
  EXPECT_FALSE(ParseAgentConfig("").ok());
}

// The corpus of configs the agent refuses (tests/data/bad_agent_configs, shared with the
// doctor's test): each parse-stage one is refused by the reader with its words, the file named.
TEST(AgentConfigTest, TheSharedCorpusOfBadConfigsIsRefusedWithItsWords) {
  const std::string dir = std::string(PARITY_SOURCE_DIR) + "/tests/data/bad_agent_configs/";
  std::ifstream index(dir + "expected.json");
  ASSERT_TRUE(index) << dir;
  const nlohmann::json expected = nlohmann::json::parse(index);
  int parsed_ones = 0;
  for (const auto& [file, want] : expected.items()) {
    if (file.front() == '_' || want["stage"] != "parse") continue;
    ++parsed_ones;
    auto parsed = LoadAgentConfig(dir + file);
    ASSERT_FALSE(parsed.ok()) << file;
    for (const auto& says : want["says"]) {
      EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(says.get<std::string>()))
          << file;
    }
  }
  EXPECT_GE(parsed_ones, 10);
}

// Every problem at once: a mistyped key is named with the errors it explains, with its line.
TEST(AgentConfigTest, UnknownKeysAreNamedWithTheErrorsAndLinesAreGiven) {
  auto parsed = ParseAgentConfig(
      "{\n  \"task\": \"tensor\",\n  \"tensor\": {\"online_run_ut\": true, \"host\": \"h\",\n"
      "    \"prot\": 59208},\n  \"parity\": {\"plaintext\": true}\n}",
      "c.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              AllOf(HasSubstr("c.json: 1 error(s)"), HasSubstr("tensor.port: the benchmark"),
                    HasSubstr("also: tensor.prot: unknown key, ignored (line 4)")));
  // On one line (a config made in code) no line is named.
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"host": "h", "prot": 1}})");
  EXPECT_THAT(parsed.status().message(), Not(HasSubstr("(line")));
}

// parity.plaintext with a tls_path given: the files are not used, and a TLS server refuses
// every call: said once, at start.
TEST(AgentConfigTest, PlaintextWithATlsPathIsAWarning) {
  auto parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1, "tls_path": "./certs"}, "parity": {"plaintext": true}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->warnings,
              Contains(AllOf(HasSubstr("parity.plaintext: true, so tensor.tls_path is not used"),
                             HasSubstr("(line 2)"))));
  parsed = ParseAgentConfig(R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "h", "port": 1}, "parity": {"plaintext": true}})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(parsed->warnings, Not(Contains(HasSubstr("parity.plaintext"))));
}

TEST(AgentConfigTest, LoadReportsMissingFile) {
  auto parsed = LoadAgentConfig("/nonexistent/parity/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(parsed.status().message(), HasSubstr("/nonexistent/parity/config.json"));
}

TEST(AgentConfigTest, LoadsFromFile) {
  const std::string path = ::testing::TempDir() + "/agent_config.json";
  std::ofstream(path) << kMsprobeAgent;
  auto parsed = LoadAgentConfig(path);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.port, 59208);
}

TEST(ConfigTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(*ParseByteSize("64MiB"), 64u << 20);
  EXPECT_EQ(*ParseByteSize(" 2 GiB "), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("500kb"), 500000u);
  EXPECT_FALSE(ParseByteSize("lots").ok());
  EXPECT_FALSE(ParseByteSize("-1MiB").ok());
  EXPECT_FALSE(ParseByteSize("99999999999999999999TiB").ok());
}

}  // namespace
}  // namespace parity::common
