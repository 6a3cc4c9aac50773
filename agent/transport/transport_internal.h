// What the transport's tests and the torch half's tests reach behind parity/transport.h: a
// session made from a configuration struct instead of JSON. Not exported from
// libparity_transport.so (test programs link the static core).
#pragma once

#include <memory>

#include "agent/transport/session.h"
#include "parity/transport.h"

namespace parity::agent {

// `session` as the C API's handle (parity_session_destroy frees both).
parity_session* WrapSession(std::unique_ptr<Session> session);

}  // namespace parity::agent
