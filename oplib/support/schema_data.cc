#include "oplib/support/schema_data.h"

#include <nlohmann/json.hpp>

namespace parity::oplib {

SchemaData ParseSchemaData(const char* json) {
  SchemaData out;
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    out.ns = j.at("namespace").get<std::string>();
    for (const nlohmann::json& e : j.at("schemas")) out.schemas.push_back(e.at("schema"));
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, "parity oplib: malformed schema data: ", e.what());
  }
  return out;
}

void DefineSchemas(torch::Library& m, const SchemaData& data) {
  for (const std::string& s : data.schemas) m.def(s.c_str());
}

}  // namespace parity::oplib
