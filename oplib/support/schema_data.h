// Operator schemas kept as data (a JSON file embedded in the library that registers them).
#pragma once

#include <torch/library.h>

#include <string>
#include <vector>

namespace parity::oplib {

struct SchemaData {
  std::string ns;                    // "npu"
  std::vector<std::string> schemas;  // "npu_rms_norm(Tensor self, ...) -> (Tensor, Tensor)"
};

// Parses {"namespace": ..., "schemas": [{"schema": ...}, ...]}; throws c10::Error when malformed.
SchemaData ParseSchemaData(const char* json);

// m.def() of every schema (m is a TORCH_LIBRARY_FRAGMENT of data.ns).
void DefineSchemas(torch::Library& m, const SchemaData& data);

}  // namespace parity::oplib
