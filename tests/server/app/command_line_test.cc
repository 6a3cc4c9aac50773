// parity-server's command line, generated from the configuration key table: every key has a
// flag, flags override the file, bad flags are named; and docs/configuration.md lists exactly the
// keys both tables hold.
#include "server/app/command_line.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<common::Parsed<server::ServerConfig>> Load(std::vector<const char*> args,
                                                          const std::string& file_text = "") {
  args.insert(args.begin(), "parity-server");
  auto line = ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (!line.ok()) return line.status();
  return server::ParseServerConfig(file_text, "config.json", line->config_flags);
}

TEST(CommandLineTest, EveryServerKeyButTaskHasAFlagInTheHelp) {
  const std::string help = HelpText();
  for (const common::KeyDescription& k : server::ServerKeys()) {
    if (k.kind == "accepted" || k.kind == "ignored" || k.path == "task") continue;
    SCOPED_TRACE(k.path);
    ASSERT_FALSE(k.flag.empty());
    EXPECT_THAT(help, HasSubstr(k.flag + " "));
    EXPECT_THAT(help, HasSubstr(k.path));
  }
}

TEST(CommandLineTest, FlagsOverrideTheFileAndTakeEveryForm) {
  auto parsed = Load({"--workers=3", "--white_list", "gelu,softmax", "--rank_list=0,2-3",
                      "--max_dims", "8", "--queue_max_bytes=1GiB", "--nogolden", "--plaintext",
                      "--max_partial_blob_bytes=1MiB", "--shutdown_grace_ms=250"},
                     R"({"task": "run_ut", "run_ut": {"port": 7, "rank_list": [9]},
                         "parity": {"workers": 1, "golden": true}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const server::ServerConfig& c = parsed->config;
  EXPECT_EQ(c.port, 7);  // from the file
  EXPECT_EQ(c.parity.workers, 3u);
  EXPECT_THAT(c.check.white_list, ::testing::ElementsAre("gelu", "softmax"));
  EXPECT_THAT(c.service.rank_list, ::testing::ElementsAre(0, 2, 3));
  EXPECT_EQ(c.parity.limits.max_dims, 8u);
  EXPECT_EQ(c.parity.queue_max_bytes, 1u << 30);
  EXPECT_FALSE(c.check.checker.golden);
  EXPECT_TRUE(c.parity.plaintext);
  EXPECT_EQ(c.service.max_partial_blob_bytes, 1u << 20);
  EXPECT_EQ(c.parity.shutdown_grace_ms, 250u);
}

TEST(CommandLineTest, BadFlagsAreNamedWithTheirKeys) {
  auto parsed = Load({"--workers=x", "--max_dims=0", "--nope", "--golden=maybe"});
  ASSERT_FALSE(parsed.ok());
  const std::string m(parsed.status().message());
  EXPECT_THAT(m, HasSubstr("--workers (parity.workers): expected an integer, got \"x\""));
  EXPECT_THAT(m, HasSubstr("--max_dims (parity.limits.max_dims): must be between 1 and 64"));
  EXPECT_THAT(m, HasSubstr("--nope: unknown flag"));
  EXPECT_THAT(m, HasSubstr("--golden (parity.golden): expected true or false"));
  std::vector<const char*> args = {"parity-server", "--port"};
  EXPECT_THAT(std::string(ParseCommandLine(2, args.data()).status().message()),
              HasSubstr("--port: needs a value"));
  args = {"parity-server", "stray"};
  EXPECT_THAT(std::string(ParseCommandLine(2, args.data()).status().message()),
              HasSubstr("unexpected argument \"stray\""));
}

// The keys listed in docs/configuration.md's tables under `heading` (one backticked key path
// in the first cell of each row) up to the next "## " heading.
std::set<std::string> DocumentedKeys(const std::string& heading) {
  std::ifstream in(PARITY_SOURCE_DIR "/docs/configuration.md");
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> keys;
  bool inside = false;
  std::string line;
  const std::regex row("^\\| `([^`]+)` \\|");
  while (std::getline(text, line)) {
    if (line.rfind("## ", 0) == 0) inside = line.rfind(heading, 0) == 0;
    std::smatch m;
    if (inside && std::regex_search(line, m, row)) keys.insert(m[1]);
  }
  return keys;
}

std::set<std::string> TableKeys(const std::vector<common::KeyDescription>& table) {
  std::set<std::string> keys;
  for (const common::KeyDescription& k : table) {
    if (k.kind != "accepted") keys.insert(k.path);  // other tasks' keys: a sentence in the docs
  }
  return keys;
}

TEST(ConfigurationDocsTest, ListExactlyTheTablesKeys) {
  EXPECT_EQ(DocumentedKeys("## Agent"), TableKeys(common::AgentKeys()));
  EXPECT_EQ(DocumentedKeys("## Server"), TableKeys(server::ServerKeys()));
}

}  // namespace
}  // namespace parity::server
