// Several benchmark servers: `tensor.host` may list them ("a,b:59209,10.0.0.7") or name a DNS
// name that resolves to several (a Kubernetes headless Service). The agent resolves them itself,
// sorts the addresses so that every rank sees one order, and rotates the list by its rank: with
// gRPC's pick_first policy, rank r streams to server r mod n (an even spread without a
// hand-made rank_list), and when that server dies it goes on with the next one in its list; the
// rest of the list is rotated by r / n, so the ranks of a dead server spread over the others.
// docs/deploy.md#many-servers says why pick_first and not round_robin.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity::agent {

// One entry of `tensor.host`: a name or address and its port.
struct ServerEndpoint {
  std::string host;
  int port = 0;
};

// "a, b:59209, [::1]:7000" with default port `port`: the entries in order. INVALID_ARGUMENT
// naming the entry for an empty one or a bad port.
absl::StatusOr<std::vector<ServerEndpoint>> ParseServerList(const std::string& hosts, int port);

// What the agent's channel is given: a single entry keeps its name ("host:port", resolved by
// gRPC, the TLS name its host); several addresses become one gRPC target listing them
// ("ipv4:10.0.0.5:59208,10.0.0.6:59208"), sorted and rotated by `rank` (a rank, or a replica
// group's route: LinkOptions::spread in connection.h).
struct ChannelTarget {
  std::string uri;
  std::vector<std::string> addresses;  // "10.0.0.5:59208", in the rank's order; one: the name
  std::string tls_name;  // the name the servers' certificates carry (the first entry's host)
};
// Resolves every entry (getaddrinfo); an entry that does not resolve is left out with a note in
// `unresolved`. UNAVAILABLE when none resolves.
absl::StatusOr<ChannelTarget> ResolveServers(const std::vector<ServerEndpoint>& servers,
                                             int64_t rank, std::vector<std::string>* unresolved);

}  // namespace parity::agent
