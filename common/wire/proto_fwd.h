// parity.v1's messages by name only, for headers that declare functions taking them without
// including protobuf's generated header: the code that calls them includes it (the edge), the
// code that does not (the server's core, fenced off parity.pb.h: cmake/ParityTargets.cmake)
// still compiles.
#pragma once

namespace parity::v1 {
class ApiCall;
class GeneratorState;
class Tensor;
class Value;
class ValueList;
}  // namespace parity::v1
