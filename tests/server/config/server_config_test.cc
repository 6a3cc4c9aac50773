#include "server/config/server_config.h"

#include "absl/strings/str_cat.h"
#include "common/config/config_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kMsprobeServer[] = R"({
  "task": "run_ut",
  "run_ut": {"white_list": [], "black_list": [], "error_data_path": "./", "is_online": true,
             "nfs_path": "", "host": "127.0.0.1", "port": 59208, "rank_list": [0],
             "tls_path": "./certs"}
})";

// msprobe's GPU-side online example, verbatim (an empty tls_path).
constexpr char kMsprobeGpuExample[] =
    R"({"task":"run_ut","run_ut":{"white_list":[],"black_list":[],"error_data_path":"./",)"
    R"("is_online":true,"nfs_path":"","host":"127.0.0.1","port":59208,"rank_list":[0],)"
    R"("tls_path":""}})";

TEST(ServerConfigTest, AcceptsMsprobeConfigAsIs) {
  auto parsed = ParseServerConfig(kMsprobeServer);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.host, "127.0.0.1");
  EXPECT_EQ(parsed->config.port, 59208);
  EXPECT_THAT(parsed->config.service.rank_list, ElementsAre(0));
  EXPECT_THAT(parsed->warnings, IsEmpty());
}

// msprobe 26.x's acc_check (its shipped config.json's section, mindstudio-probe 26.2.0: white_list,
// black_list, error_data_path), with the online keys Parity needs: read as run_ut, the keys that
// carry over with their meaning, anything else named under acc_check's name and line.
TEST(ServerConfigTest, Msprobe26sAccCheckIsReadAsRunUt) {
  auto parsed = ParseServerConfig(
      "{\n  \"task\": \"acc_check\",\n  \"acc_check\": {\n    \"white_list\": [\"relu\"],\n"
      "    \"black_list\": [],\n    \"error_data_path\": \"./errors\",\n"
      "    \"port\": 59208, \"tls_path\": \"./certs\",\n    \"precheck_mode\": \"fast\"\n  }\n}",
      "msprobe26.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->config.check.white_list, ElementsAre("relu"));
  EXPECT_EQ(parsed->config.check.error_data_path, "./errors");
  EXPECT_EQ(parsed->config.port, 59208);
  EXPECT_EQ(parsed->config.tls_path, "./certs");
  EXPECT_THAT(parsed->warnings, Contains("acc_check.precheck_mode: unknown key, ignored (line 8)"));
  auto bad = ParseServerConfig(R"({"task": "acc_check", "acc_check": {"port": "x"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("acc_check.port: expected an integer"));
  auto both = ParseServerConfig(R"({"task": "run_ut", "run_ut": {}, "acc_check": {}})");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("run_ut, acc_check: one server section"));
}

TEST(ServerConfigTest, ReadsParitySectionAndLimits) {
  auto parsed = ParseServerConfig(R"({"task": "run_ut", "run_ut": {"port": 0, "tls_path": "t"},
      "parity": {"output_dir": "/tmp/out", "metrics_port": -1, "workers": 2, "intra_op_threads": 3,
                 "verdict_hold_ms": 25, "max_message_bytes": "8MiB", "bench_device": "cpu",
                 "limits": {"max_tensor_bytes": "1GiB", "max_dims": 8}}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ServerConfig& c = parsed->config;
  EXPECT_EQ(c.port, 0);
  EXPECT_EQ(c.check.output_dir, "/tmp/out");
  EXPECT_EQ(c.parity.metrics_port, -1);
  EXPECT_EQ(c.parity.workers, 2u);
  EXPECT_EQ(c.parity.intra_op_threads, 3u);
  EXPECT_EQ(c.service.verdict_hold_ms, 25u);
  EXPECT_EQ(c.parity.max_message_bytes, 8u << 20);
  EXPECT_EQ(c.parity.limits.max_tensor_bytes, 1u << 30);
  EXPECT_EQ(c.parity.limits.max_dims, 8u);
}

// The checker's modes are enums from the moment they are read: each word of the docs maps to
// its value, the default is the documented one, and any other word is the key's error.
TEST(ServerConfigTest, GoldenDeviceAndRandomChecksAreReadAsEnums) {
  const ServerConfig defaults = ParseServerConfig(R"({"task": "run_ut"})").value().config;
  EXPECT_EQ(defaults.check.checker.golden_device, GoldenDevice::kAuto);
  EXPECT_EQ(defaults.check.checker.random_checks, RandomChecks::kAuto);
  const std::pair<const char*, RandomChecks> modes[] = {{"auto", RandomChecks::kAuto},
                                                        {"statistical", RandomChecks::kStatistical},
                                                        {"skip", RandomChecks::kSkip}};
  for (const auto& [word, mode] : modes) {
    auto parsed = ParseServerConfig(
        absl::StrCat(R"({"task": "run_ut", "parity": {"golden_device": "cpu", "random_checks": ")",
                     word, R"("}})"));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->config.check.checker.golden_device, GoldenDevice::kCpu);
    EXPECT_EQ(parsed->config.check.checker.random_checks, mode) << word;
  }
  auto bad = ParseServerConfig(
      R"({"task": "run_ut", "parity": {"golden_device": "gpu", "random_checks": "Auto"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr(R"(parity.golden_device: expected one of "auto", "cpu", got "gpu")"));
  EXPECT_THAT(bad.status().message(), HasSubstr("parity.random_checks: expected one of"));
}

TEST(ServerConfigTest, InvalidValuesAreClearErrors) {
  auto parsed = ParseServerConfig(R"({"task": "run_ut", "run_ut": {"port": 1, "tls_path": "",
      "rank_list": "0", "nfs_path": "/nfs"}, "parity": {"limits": {"max_dims": 0},
      "intra_op_threads": -1, "verdict_hold_ms": 1001}})");
  ASSERT_FALSE(parsed.ok());
  const std::string m(parsed.status().message());
  EXPECT_THAT(m, HasSubstr("run_ut.rank_list: expected a list of integers, got \"0\""));
  EXPECT_THAT(m, HasSubstr("run_ut.nfs_path: shared-storage (NFS) mode is not supported"));
  EXPECT_THAT(m, HasSubstr("parity.limits.max_dims: must be between 1 and 64, got 0"));
  EXPECT_THAT(m, HasSubstr("parity.intra_op_threads: must be between 0 and 1024, got -1"));
  EXPECT_THAT(m, HasSubstr("parity.verdict_hold_ms: must be between 0 and 1000, got 1001"));
  auto names = ParseServerConfig(R"({"task": "run_ut", "run_ut": {"port": 1, "tls_path": "t",
      "white_list": ["Functional.linear", "a b"]}})");
  ASSERT_FALSE(names.ok());
  EXPECT_THAT(names.status().message(), HasSubstr("run_ut.white_list: \"a b\": not an operator"));
}

// msprobe's GPU-side example, verbatim: plaintext on 127.0.0.1 with a loud warning. A file that
// leaves tls_path out gets msprobe's default "./"; an empty --tls_path with no plaintext chosen
// is still refused.
TEST(ServerConfigTest, MsprobesExampleAndDefaultsChooseTlsOrPlaintextAsMsprobeDoes) {
  auto parsed = ParseServerConfig(kMsprobeGpuExample);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->config.parity.plaintext);
  EXPECT_THAT(parsed->warnings,
              Contains(AllOf(HasSubstr("run_ut.tls_path"), HasSubstr("unencrypted"))));
  EXPECT_TRUE(ValidateServerConfig(parsed->config).ok());
  parsed = ParseServerConfig(R"({"task": "run_ut", "run_ut": {"port": 59208}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.tls_path, "./");
  EXPECT_FALSE(parsed->config.parity.plaintext);
  EXPECT_TRUE(ValidateServerConfig(parsed->config).ok());
  parsed->config.tls_path.clear();  // --tls_path= on the command line
  absl::Status v = ValidateServerConfig(parsed->config);
  EXPECT_EQ(v.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.message()), HasSubstr("run_ut.tls_path: TLS is required"));
}

// Each key lands in the options struct of the component that reads it, and nowhere else: the
// service is handed config.service, the pipeline config.check (with its checker's and error
// data's inside), the root keeps config.parity. A key moved between structs without its row
// (or the other way round) fails here.
TEST(ServerConfigTest, EachKeyIsReadIntoItsOwnersOptions) {
  auto parsed = ParseServerConfig(R"({"task": "run_ut",
      "run_ut": {"white_list": ["gelu"], "error_data_path": "err", "rank_list": [1, 3]},
      "parity": {"plaintext": true, "output_dir": "/out", "max_streams": 7,
                 "max_partial_blob_bytes": "1MiB", "max_kept_blob_bytes": "2MiB",
                 "verdict_hold_ms": 0, "bench_device": "cpu", "golden": false,
                 "golden_device": "cpu", "random_checks": "skip", "random_false_alarm": 0.001,
                 "save_error_data": false, "error_data_max_bytes": "3MiB",
                 "error_data_per_op": 9, "kept_blob_bytes": "4MiB", "workers": 5}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ServerConfig& c = parsed->config;
  EXPECT_THAT(c.service.rank_list, ElementsAre(1, 3));
  EXPECT_EQ(c.service.max_streams, 7u);
  EXPECT_EQ(c.service.max_partial_blob_bytes, 1u << 20);
  EXPECT_EQ(c.service.max_kept_blob_bytes, 2u << 20);
  EXPECT_EQ(c.service.verdict_hold_ms, 0u);
  EXPECT_THAT(c.check.white_list, ElementsAre("gelu"));
  EXPECT_EQ(c.check.output_dir, "/out");
  EXPECT_EQ(c.check.ErrorDataPath(), "/out/err");
  EXPECT_FALSE(c.check.save_error_data);
  EXPECT_EQ(c.check.checker.bench_device, "cpu");
  EXPECT_FALSE(c.check.checker.golden);
  EXPECT_EQ(c.check.checker.golden_device, GoldenDevice::kCpu);
  EXPECT_EQ(c.check.checker.random_checks, RandomChecks::kSkip);
  EXPECT_DOUBLE_EQ(c.check.checker.random_false_alarm, 0.001);
  EXPECT_EQ(c.check.error_data.max_bytes, 3u << 20);
  EXPECT_EQ(c.check.error_data.max_per_op, 9u);
  EXPECT_EQ(c.parity.kept_blob_bytes, 4u << 20);
  EXPECT_EQ(c.parity.workers, 5u);
}

// A key's default is its member's initialiser in the owner's struct, and the table shows it: an
// empty file reads to default-constructed options, and the described defaults are theirs.
TEST(ServerConfigTest, DefaultsAreTheOwnersInitialisers) {
  auto parsed = ParseServerConfig("", "none", {{"plaintext", std::nullopt}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ServerConfig& c = parsed->config;
  const ServiceOptions service;
  const PipelineOptions check;
  EXPECT_EQ(c.service.max_streams, service.max_streams);
  EXPECT_EQ(c.service.max_kept_blob_bytes, service.max_kept_blob_bytes);
  EXPECT_EQ(c.check.checker.bench_device, check.checker.bench_device);
  EXPECT_EQ(c.check.error_data.max_per_op, check.error_data.max_per_op);
  std::map<std::string, std::string> defaults;
  for (const common::KeyDescription& k : ServerKeys()) defaults[k.path] = k.default_value;
  EXPECT_EQ(defaults["parity.max_streams"], absl::StrCat(service.max_streams));
  EXPECT_EQ(defaults["parity.verdict_hold_ms"], absl::StrCat(service.verdict_hold_ms));
  EXPECT_EQ(defaults["parity.bench_device"], check.checker.bench_device);
  EXPECT_EQ(defaults["parity.golden"], check.checker.golden ? "true" : "false");
  EXPECT_EQ(defaults["parity.error_data_per_op"], absl::StrCat(check.error_data.max_per_op));
  EXPECT_EQ(defaults["parity.random_checks"], "auto");
}

}  // namespace
}  // namespace parity::server
