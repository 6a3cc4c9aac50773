// A C++ client of libparity_transport.so, compiled twice from this one file: with
// -D_GLIBCXX_USE_CXX11_ABI=0 (the old std::string, as pip torch wheels long were) and with =1
// (the distribution's), both linked against the one transport binary. Its own code uses
// std::string, std::vector and std::function on its side of the C API; the transport uses the
// distribution's gRPC on the other. Same checks as c_client.c: pass, error, skip.
//
//   cxx_client_abi0 PORT / cxx_client_abi1 PORT
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parity/transport.h"

#if _GLIBCXX_USE_CXX11_ABI != PARITY_EXPECTED_CXX11_ABI
#error "compiled with another C++ ABI than the test asked for"
#endif

namespace {

int failures = 0;
void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "cxx_client: check failed: %s\n", what.c_str());
    ++failures;
  }
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutField(std::string* out, uint32_t field, const std::string& message) {
  PutVarint(out, (uint64_t{field} << 3) | 2);
  PutVarint(out, message.size());
  *out += message;
}

// ApiCall.inputs/outputs entry: Value{tensor: Tensor{FLOAT32, [n], data}}.
std::string TensorValue(const std::vector<float>& values) {
  std::string tensor, shape;
  PutVarint(&tensor, 1 << 3);
  PutVarint(&tensor, 9);
  PutVarint(&shape, values.size());
  PutField(&tensor, 2, shape);
  PutField(
      &tensor, 4,
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  std::string value;
  PutField(&value, 1, tensor);
  return value;
}

struct AddCall {
  std::vector<float> a, b, sum;
  bool fail = false;
  int released = 0;
  std::function<std::string()> describe;  // a C++ object crossing nothing: stays on this side
};

int Encode(void* ctx, const parity_encode_limits* /*limits*/, const parity_blob_sink* /*sink*/,
           parity_bytes* out, char* error, size_t error_size) {
  auto* call = static_cast<AddCall*>(ctx);
  if (call->fail) {
    std::snprintf(error, error_size, "%s", ("refused: " + call->describe()).c_str());
    return 12;
  }
  auto* fields = new std::string;
  PutField(fields, 12, TensorValue(call->a));
  PutField(fields, 12, TensorValue(call->b));
  std::string alpha;
  PutVarint(&alpha, 2 << 3);
  PutVarint(&alpha, 1);
  PutField(fields, 12, alpha);
  PutField(fields, 13, TensorValue(call->sum));
  out->data = fields->data();
  out->size = fields->size();
  out->owner = fields;
  out->release = [](void* owner) { delete static_cast<std::string*>(owner); };
  return 0;
}

void Send(parity_session* s, AddCall* call) {
  const std::string op = "aten::add", overload = "Tensor", empty, module = "cxx_client";
  parity_call_site site{};
  site.size = sizeof(site);
  site.op = op.c_str();
  site.overload = overload.c_str();
  site.node = empty.c_str();
  site.module = module.c_str();
  site.node_sequence_nr = -1;
  site.forward_sequence_nr = -1;
  uint32_t flags = 0;
  parity_call* c = parity_call_begin(s, &site, &flags);
  Check(c != nullptr && (flags & PARITY_CALL_WITH_VALUES) != 0, "the call is captured");
  if (c == nullptr) return;
  parity_values v{};
  v.size = sizeof(v);
  v.ctx = call;
  v.bytes = 36;
  v.encode = &Encode;
  v.release = [](void* ctx) { static_cast<AddCall*>(ctx)->released++; };
  parity_call_capture(c, &v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cxx_client PORT\n");
    return 2;
  }
  std::printf("cxx_client: _GLIBCXX_USE_CXX11_ABI=%d, sizeof(std::string)=%zu, transport %s\n",
              _GLIBCXX_USE_CXX11_ABI, sizeof(std::string), parity_transport_version());
  Check(parity_transport_abi() == PARITY_TRANSPORT_ABI, "the transport's ABI");
  const std::string config =
      std::string(
          "{\"task\": \"tensor\", \"tensor\": {\"online_run_ut\": true, \"host\": "
          "\"127.0.0.1\", \"port\": ") +
      argv[1] +
      "}, \"parity\": {\"plaintext\": true, \"policy\": \"block\", \"connect_timeout_ms\": "
      "20000}}";
  std::vector<char> error(256);
  parity_host host{};
  host.size = sizeof(host);
  const std::string framework =
      "none (C++ client, ABI " + std::to_string(_GLIBCXX_USE_CXX11_ABI) + ")";
  host.framework_version = framework.c_str();
  host.device_type = "cpu";
  parity_session* s =
      parity_session_create(config.c_str(), nullptr, &host, error.data(), error.size());
  if (s == nullptr) {
    std::fprintf(stderr, "cxx_client: %s\n", error.data());
    return 1;
  }
  parity_session_start(s);
  auto name = [](const char* n) {
    return std::function<std::string()>([n] { return std::string(n); });
  };
  AddCall right{{1, 2, 3}, {4, 5, 6}, {5, 7, 9}, false, 0, name("right")};
  AddCall wrong{{1, 2, 3}, {4, 5, 6}, {5, 7, 10}, false, 0, name("wrong")};
  AddCall refused{{1, 2, 3}, {4, 5, 6}, {5, 7, 9}, true, 0, name("refused")};
  for (AddCall* c : {&right, &wrong, &refused}) Send(s, c);
  Check(parity_session_flush(s, 60000) == 1, "every call answered");
  parity_counters counters{};
  counters.size = sizeof(counters);
  parity_session_counters(s, &counters);
  std::printf("cxx_client: verdicts %llu: pass %llu error %llu skip %llu\n",
              static_cast<unsigned long long>(counters.verdicts),
              static_cast<unsigned long long>(counters.pass),
              static_cast<unsigned long long>(counters.error),
              static_cast<unsigned long long>(counters.skip));
  Check(counters.verdicts == 3 && counters.pass == 1 && counters.error == 1 && counters.skip == 1,
        "pass, error, skip");
  parity_session_destroy(s);
  Check(right.released == 1 && wrong.released == 1 && refused.released == 1, "values released");
  if (failures == 0) std::printf("cxx_client: every check held\n");
  return failures == 0 ? 0 : 1;
}
