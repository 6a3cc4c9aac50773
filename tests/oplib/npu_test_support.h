// The fixture of the reference library's tests: the library loaded as the server loads it, and
// an operator called boxed with its defaults filled in, as the server's decoder does.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/replay/operator_libraries.h"

namespace parity::server {

using Stack = std::vector<c10::IValue>;

class NpuReferenceTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    auto libs = LoadOperatorLibraries(/*npu_reference=*/true, {});
    ASSERT_TRUE(libs.ok()) << libs.status();
  }

  static Stack Call(const std::string& name, Stack args) {
    const auto dot = name.find('.');
    const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
        name.substr(0, dot).c_str(), dot == std::string::npos ? "" : name.substr(dot + 1).c_str());
    // Fill defaulted arguments, as the server's decoder does.
    const auto& schema = op.schema();
    for (std::size_t i = args.size(); i < schema.arguments().size(); ++i) {
      args.push_back(*schema.arguments()[i].default_value());
    }
    op.callBoxed(&args);
    return args;
  }
  static at::Tensor T(const Stack& s, std::size_t i) { return s.at(i).toTensor(); }
};

}  // namespace parity::server
