// libFuzzer target: arbitrary bytes as an AgentMessage, every value decoded under tight caps.
// Built with clang (tests/fuzz/run.sh); the regular build links it with replay_main.cc so the
// same entry point runs in ctest over a deterministic mutation corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "google/protobuf/stubs/logging.h"
#include "parity/v1/parity.pb.h"

// A valid message for seeding: a call with a tensor, an optional-tensor list and a scalar.
std::string DecodeFuzzSeed(int which) {
  parity::v1::AgentMessage m;
  parity::v1::ApiCall* call = m.mutable_call();
  call->set_op_name("aten::add");
  call->set_overload("Tensor");
  parity::v1::Tensor* t = call->add_inputs()->mutable_tensor();
  t->set_dtype(which % 2 ? parity::v1::DTYPE_FLOAT32 : parity::v1::DTYPE_BFLOAT16);
  t->add_shape(2);
  t->add_shape(3);
  t->set_data(std::string(which % 2 ? 24 : 12, '\x3f'));
  parity::v1::ValueList* list = call->add_inputs()->mutable_list();
  list->set_kind(which % 3 ? parity::v1::LIST_KIND_OPTIONAL_TENSOR : parity::v1::LIST_KIND_TUPLE);
  list->add_items()->mutable_none();
  *list->add_items()->mutable_tensor() = *t;
  call->add_inputs()->set_double_value(1.0);
  call->add_outputs()->mutable_device()->set_type("cpu");
  return m.SerializeAsString();
}

// Silences protobuf's log lines about invalid UTF-8 (expected for random bytes) and seeds an
// empty corpus folder, the first non-flag argument.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = (*argv)[i];
    if (arg.empty() || arg[0] == '-') continue;
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec) && std::filesystem::is_empty(arg, ec)) {
      for (int s = 0; s < 6; ++s) {
        std::ofstream(arg + "/seed" + std::to_string(s), std::ios::binary) << DecodeFuzzSeed(s);
      }
    }
    break;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  parity::v1::AgentMessage message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!message.has_call()) return 0;
  parity::common::DecodeLimits limits;
  limits.max_tensor_bytes = 16u << 20;
  limits.max_tensor_numel = 4u << 20;
  limits.max_call_bytes = 32u << 20;
  parity::common::ValueDecoder decoder(limits);
  c10::IValue out;
  for (const auto& v : message.call().inputs()) (void)decoder.Decode(v, "inputs", &out);
  for (const auto& v : message.call().outputs()) (void)decoder.Decode(v, "outputs", &out);
  return 0;
}
