// The encoding half of common/torch/value_codec.h: the wire encoder's bytes, parsed.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

absl::Status EncodeValue(const c10::IValue& value, const c10::Type* type_hint,
                         const EncodeOptions& options, absl::string_view path, v1::Value* out) {
  wire::Message m;
  std::vector<c10::IValue> keep_alive;
  const EncodeError e = EncodeValueWire(
      value, type_hint, options, std::string_view(path.data(), path.size()), &m, &keep_alive);
  if (!e.ok()) return absl::Status(static_cast<absl::StatusCode>(e.code), e.message);
  if (!out->ParseFromString(m.Serialize())) {
    return absl::InternalError(absl::StrCat(path, ": the encoder wrote bytes that do not parse"));
  }
  return absl::OkStatus();
}

}  // namespace parity::common
