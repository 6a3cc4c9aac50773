// Who sent a call: what the stream's Hello said of its agent, kept with each call for the
// result files' JSON-lines record and the error data. Plain data, no proto: the service makes it
// from the Hello (server/service/stream_session.cc), everything after reads it.
#pragma once

#include <cstdint>
#include <string>

namespace parity::server {

struct CallOrigin {
  int32_t rank = 0;
  std::string run_id;
  std::string hostname;
  // The training's framework as its agent's Hello says it ("torch 2.1.0"); empty if not said.
  std::string framework;
};

}  // namespace parity::server
