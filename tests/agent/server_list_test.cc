// tensor.host with several servers: parsing, resolution, and the rank-rotated order that spreads
// ranks evenly and fails a dead server's ranks over to the others in turn.
#include "agent/transport/server_list.h"
#include "agent/transport/replica_routes.h"

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

// A group's replica reports go to one server whichever rank sends them
// (docs/replicas.md#several-servers): the route depends on the run and the group only, and a
// link spread by a route's index starts at that server and fails over in one order on every
// rank.
TEST(ServerListTest, AReplicaGroupPicksOneServerAndOneFailOverOrderOnEveryRank) {
  const std::vector<int32_t> group = {0, 1, 2, 3};
  const uint64_t route = ReplicaRoute("run-a", group);
  EXPECT_EQ(route, ReplicaRoute("run-a", {0, 1, 2, 3}));
  EXPECT_NE(route, ReplicaRoute("run-b", group));
  EXPECT_NE(route, ReplicaRoute("run-a", {0, 1, 2}));
  EXPECT_NE(ReplicaRoute("run-a", {0, 2}), ReplicaRoute("run-a", {1, 3}));
  // FNV-1a 64 of "run-a", a zero byte and 0, 1 as little-endian words, worked by hand from the
  // definition's offset basis and prime.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : std::string("run-a") + std::string(1, '\0') +
                             std::string("\x00\x00\x00\x00\x01\x00\x00\x00", 8)) {
    h = (h ^ c) * 1099511628211ull;
  }
  EXPECT_EQ(ReplicaRoute("run-a", {0, 1}), h);
  // Many groups (the data-parallel groups of a 3D-parallel job) spread over the servers.
  std::map<uint64_t, int> per_server;
  for (int32_t g = 0; g < 64; ++g) per_server[ReplicaRoute("run-a", {g, g + 64}) % 3]++;
  EXPECT_EQ(per_server.size(), 3u);
  for (const auto& [server, n] : per_server) EXPECT_GT(n, 8) << server;

  std::vector<std::string> unresolved;
  const std::vector<ServerEndpoint> servers = {
      {"127.0.0.3", 9}, {"127.0.0.1", 9}, {"127.0.0.2", 9}};
  for (int64_t index = 0; index < 3; ++index) {
    auto t = ResolveServers(servers, index, &unresolved);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->addresses[0], "127.0.0." + std::to_string(index + 1) + ":9");
    EXPECT_EQ(t->addresses[1], "127.0.0." + std::to_string((index + 1) % 3 + 1) + ":9");
  }
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
