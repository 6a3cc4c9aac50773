#include "agent/transport/server_list.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace parity::agent {
namespace {

// The numeric addresses `host` resolves to, with the family of each (AF_INET, AF_INET6).
std::vector<std::pair<int, std::string>> Resolve(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  std::vector<std::pair<int, std::string>> out;
  if (rc != 0) {
    *error = ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
        ::inet_ntop(a->ai_family, raw, text, sizeof(text)) != nullptr) {
      out.emplace_back(a->ai_family, text);
    }
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ServerEndpoint>> ParseServerList(const std::string& hosts, int port) {
  std::vector<ServerEndpoint> out;
  for (absl::string_view raw : absl::StrSplit(hosts, ',')) {
    const std::string entry(absl::StripAsciiWhitespace(raw));
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor.host: an empty entry in \"", hosts, "\""));
    }
    ServerEndpoint e{entry, port};
    // "[v6]:port", "[v6]", "name:port", "v4:port"; a bare IPv6 address (two colons) has no port.
    std::string port_text;
    if (entry.front() == '[') {
      const std::size_t close = entry.find(']');
      if (close == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("tensor.host: \"", entry, "\": no ]"));
      }
      e.host = entry.substr(1, close - 1);
      if (close + 1 < entry.size()) {
        if (entry[close + 1] != ':') {
          return absl::InvalidArgumentError(
              absl::StrCat("tensor.host: \"", entry, "\": expected :port after ]"));
        }
        port_text = entry.substr(close + 2);
      }
    } else if (std::count(entry.begin(), entry.end(), ':') == 1) {
      const std::size_t colon = entry.find(':');
      e.host = entry.substr(0, colon);
      port_text = entry.substr(colon + 1);
    }
    if (!port_text.empty() || (entry.back() == ':')) {
      int p = 0;
      if (!absl::SimpleAtoi(port_text, &p) || p < 1 || p > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor.host: \"", entry, "\": the port must be 1 to 65535"));
      }
      e.port = p;
    }
    if (e.host.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor.host: \"", entry, "\": no host"));
    }
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<ChannelTarget> ResolveServers(const std::vector<ServerEndpoint>& servers,
                                             int64_t rank, std::vector<std::string>* unresolved) {
  ChannelTarget t;
  if (servers.empty()) return absl::InvalidArgumentError("tensor.host: no server");
  t.tls_name = servers.front().host;
  std::vector<std::pair<int, std::string>> v4, v6;  // (port, address)
  for (const ServerEndpoint& s : servers) {
    std::string error;
    const auto found = Resolve(s.host, &error);
    if (found.empty()) {
      unresolved->push_back(absl::StrCat(s.host, ": ", error.empty() ? "no address" : error));
      continue;
    }
    for (const auto& [family, address] : found) {
      (family == AF_INET ? v4 : v6).emplace_back(s.port, address);
    }
  }
  // One family for the whole list (gRPC's ipv4:/ipv6: targets hold one): IPv4 when there is any.
  const bool ipv4 = !v4.empty();
  std::vector<std::pair<int, std::string>>& chosen = ipv4 ? v4 : v6;
  if (chosen.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no server address resolves: ", absl::StrJoin(*unresolved, "; ")));
  }
  std::vector<std::string> addresses;
  for (const auto& [port, address] : chosen) {
    addresses.push_back(ipv4 ? absl::StrCat(address, ":", port)
                             : absl::StrCat("[", address, "]:", port));
  }
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  if (servers.size() == 1 && addresses.size() == 1) {
    // One server: gRPC resolves the name itself, as before (and re-resolves it on reconnect).
    t.uri = absl::StrCat(servers.front().host.find(':') != std::string::npos
                             ? absl::StrCat("[", servers.front().host, "]")
                             : servers.front().host,
                         ":", servers.front().port);
    t.addresses = {t.uri};
    return t;
  }
  // Rank r streams to address r mod n; the ranks of one server fail over to the others in turn
  // (the rest of the list rotated by r / n), so a dead server's load is spread, not moved.
  const std::size_t n = addresses.size();
  const std::size_t r = static_cast<std::size_t>(std::max<int64_t>(rank, 0));
  std::rotate(addresses.begin(), addresses.begin() + static_cast<std::ptrdiff_t>(r % n),
              addresses.end());
  if (n > 2) {
    std::rotate(addresses.begin() + 1,
                addresses.begin() + 1 + static_cast<std::ptrdiff_t>((r / n) % (n - 1)),
                addresses.end());
  }
  t.uri = absl::StrCat(ipv4 ? "ipv4:" : "ipv6:", absl::StrJoin(addresses, ","));
  t.addresses = std::move(addresses);
  return t;
}

}  // namespace parity::agent
