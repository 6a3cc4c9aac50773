// Plain TCP helpers for diagnostics and shutdown (the data path is gRPC's).
#pragma once

#include <string>

namespace parity::common {

// A blocking TCP socket connected to host:port within `timeout_ms` (then also its send and
// receive timeout), or -1 with `error` saying why ("... Connection refused (is parity-server
// running on that port?)"). The caller closes it.
int ConnectTcp(const std::string& host, int port, int timeout_ms, std::string* error);

}  // namespace parity::common
