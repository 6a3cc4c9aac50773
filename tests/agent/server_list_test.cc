// tensor.host with several servers: parsing, resolution, and the rank-rotated order that spreads
// ranks evenly and fails a dead server's ranks over to the others in turn.
#include "agent/transport/server_list.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ServerListTest, EntriesTakeTheirOwnPortOrTheDefault) {
  auto list = ParseServerList("a, b:7000 ,[::1]:7001,[fd00::7],10.0.0.5:1,fd00::8", 59208);
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> text;
  for (const ServerEndpoint& e : *list) text.push_back(e.host + "|" + std::to_string(e.port));
  EXPECT_THAT(text, ElementsAre("a|59208", "b|7000", "::1|7001", "fd00::7|59208", "10.0.0.5|1",
                                "fd00::8|59208"));
  for (const char* bad : {"a,,b", "a:0", "a:70000", "a:x", "[::1", "[::1]x", ":5", "a:"}) {
    auto r = ParseServerList(bad, 1);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("tensor.host")) << bad;
  }
}

TEST(ServerListTest, OneServerKeepsItsName) {
  std::vector<std::string> unresolved;
  auto t = ResolveServers({{"localhost", 59208}}, 5, &unresolved);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->uri, "localhost:59208");
  EXPECT_EQ(t->tls_name, "localhost");
}

TEST(ServerListTest, RanksSpreadEvenlyAndFailOverInTurn) {
  std::vector<std::string> unresolved;
  const std::vector<ServerEndpoint> servers = {
      {"127.0.0.3", 9}, {"127.0.0.1", 9}, {"127.0.0.2", 9}, {"127.0.0.1", 9}};  // one repeated
  std::map<std::string, int> first, second_of_first;
  for (int rank = 0; rank < 12; ++rank) {
    auto t = ResolveServers(servers, rank, &unresolved);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ(t->addresses.size(), 3u);  // deduplicated
    EXPECT_EQ(t->uri.rfind("ipv4:", 0), 0u) << t->uri;
    EXPECT_EQ(t->tls_name, "127.0.0.3");
    first[t->addresses[0]]++;
    // Every rank orders alike before rotating: rank r starts at sorted address r mod 3.
    EXPECT_EQ(t->addresses[0], "127.0.0." + std::to_string(rank % 3 + 1) + ":9") << rank;
    if (rank % 3 == 0) second_of_first[t->addresses[1]]++;
  }
  EXPECT_THAT(first, ElementsAre(std::pair<const std::string, int>("127.0.0.1:9", 4),
                                 std::pair<const std::string, int>("127.0.0.2:9", 4),
                                 std::pair<const std::string, int>("127.0.0.3:9", 4)));
  // The 4 ranks of 127.0.0.1 fail over 2 and 2 to the other servers.
  EXPECT_THAT(second_of_first, ElementsAre(std::pair<const std::string, int>("127.0.0.2:9", 2),
                                           std::pair<const std::string, int>("127.0.0.3:9", 2)));
  EXPECT_TRUE(unresolved.empty());
}

TEST(ServerListTest, UnresolvableEntriesAreLeftOutAndNamed) {
  std::vector<std::string> unresolved;
  auto t = ResolveServers({{"no-such-host.invalid", 9}, {"127.0.0.1", 9}}, 0, &unresolved);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->addresses, ElementsAre("127.0.0.1:9"));
  ASSERT_EQ(unresolved.size(), 1u);
  EXPECT_THAT(unresolved[0], HasSubstr("no-such-host.invalid"));
  unresolved.clear();
  auto none = ResolveServers({{"no-such-host.invalid", 9}}, 0, &unresolved);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace parity::agent
