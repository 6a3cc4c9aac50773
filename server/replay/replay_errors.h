// What a replay's failure was, for the verdict: its text, and whether memory ran out. Torch-free
// declarations (server/replay/replay.cc defines them).
#pragma once

#include <exception>
#include <string>

namespace parity::server {

// An exception's message; libtorch's without its backtrace; "out of memory (...)" for
// std::bad_alloc.
std::string ErrorText(const std::exception& e);
// Whether `e` is an allocation failure: std::bad_alloc, libtorch's allocators' errors ("can't
// allocate memory", "out of memory"), or a thread that could not be started.
bool IsOutOfMemory(const std::exception& e);

}  // namespace parity::server
