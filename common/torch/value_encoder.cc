// The encoding half of common/torch/value_codec.h: c10::IValue -> parity.v1.Value.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "common/torch/dtype_map.h"
#include "common/torch/tensor_stats.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"

namespace parity::common {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; big-endian hosts need byte swapping");

// Protobuf `string` fields must hold UTF-8, and a message with invalid UTF-8 fails to parse on the
// other side, which would lose the whole call; such strings are refused at encode time.
bool IsValidUtf8(absl::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Strips Optional[...] from a type hint.
const c10::Type* Unwrap(const c10::Type* hint) {
  while (hint != nullptr && hint->kind() == c10::TypeKind::OptionalType) {
    hint = hint->castRaw<c10::OptionalType>()->getElementType().get();
  }
  return hint;
}

const c10::Type* ListElementHint(const c10::Type* hint) {
  hint = Unwrap(hint);
  if (hint != nullptr && hint->kind() == c10::TypeKind::ListType) {
    return hint->castRaw<c10::ListType>()->getElementType().get();
  }
  return nullptr;
}

absl::Status EncodeTensor(const at::Tensor& tensor, const EncodeOptions& options,
                          absl::string_view path, v1::Tensor* out) {
  if (!tensor.defined()) {
    out->set_form(v1::DATA_FORM_UNDEFINED);
    return absl::OkStatus();
  }
  if (tensor.layout() != c10::kStrided) {
    return absl::UnimplementedError(absl::StrCat(path, ": tensors with layout ",
                                                 c10::toString(tensor.layout()),
                                                 " cannot be sent (only strided tensors)"));
  }
  if (tensor.is_quantized()) {
    return absl::UnimplementedError(absl::StrCat(path, ": quantized tensors cannot be sent"));
  }
  if (tensor.is_meta()) {
    return absl::UnimplementedError(absl::StrCat(path, ": meta tensors carry no data"));
  }
  std::optional<v1::DType> dtype = ToWireDType(tensor.scalar_type());
  if (!dtype) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": dtype ", c10::toString(tensor.scalar_type()), " has no wire representation"));
  }
  if (options.accepted_dtypes != nullptr &&
      std::find(options.accepted_dtypes->begin(), options.accepted_dtypes->end(), *dtype) ==
          options.accepted_dtypes->end()) {
    return absl::UnimplementedError(absl::StrCat(path, ": dtype ", TorchName(*dtype),
                                                 " is not among the server's accepted dtypes"));
  }
  out->set_dtype(*dtype);
  for (int64_t d : tensor.sizes()) out->add_shape(d);
  for (int64_t s : tensor.strides()) out->add_original_strides(s);
  out->set_device(tensor.device().str());
  out->set_requires_grad(tensor.requires_grad());

  at::Tensor host = tensor.detach();
  if (host.is_conj()) host = host.resolve_conj();
  if (host.is_neg()) host = host.resolve_neg();
  if (!host.is_cpu()) host = host.to(at::kCPU);
  host = host.contiguous();
  const uint64_t bytes = static_cast<uint64_t>(host.numel()) * host.element_size();
  const char* data = static_cast<const char*>(host.data_ptr());

  if (options.blob_sink != nullptr && options.reuse_min_bytes > 0 &&
      bytes >= options.reuse_min_bytes && bytes <= options.max_tensor_bytes) {
    const absl::string_view payload(data, bytes);
    if (options.compute_crc32c) out->set_crc32c(Crc32c(payload));
    out->set_form(v1::DATA_FORM_CHUNKED);
    out->set_blob_id(options.blob_sink->AddReusable(payload));
  } else if (bytes <= options.max_inline_tensor_bytes) {
    out->set_form(v1::DATA_FORM_INLINE);
    if (bytes > 0) out->mutable_data()->assign(data, bytes);
    if (options.compute_crc32c) out->set_crc32c(Crc32c(out->data()));
  } else if (options.blob_sink != nullptr && bytes <= options.max_tensor_bytes) {
    std::string payload(data, bytes);
    if (options.compute_crc32c) out->set_crc32c(Crc32c(payload));
    out->set_form(v1::DATA_FORM_CHUNKED);
    out->set_blob_id(options.blob_sink->AddBlob(std::move(payload)));
  } else {
    out->set_form(v1::DATA_FORM_STATS_ONLY);
    *out->mutable_stats() = TensorStatistics(host);
  }
  return absl::OkStatus();
}

absl::Status EncodeImpl(const c10::IValue& v, const c10::Type* hint, const EncodeOptions& options,
                        std::string& path, uint32_t depth, v1::Value* out);

// Encodes each element of a list-like IValue into `list` (with per-item paths).
template <typename Range>
absl::Status EncodeItems(const Range& items, const c10::Type* elem_hint,
                         const EncodeOptions& options, std::string& path, uint32_t depth,
                         v1::ValueList* list) {
  const std::size_t base = path.size();
  std::size_t i = 0;
  for (const auto& item : items) {
    absl::StrAppend(&path, "[", i++, "]");
    c10::IValue iv(item);
    absl::Status s = EncodeImpl(iv, elem_hint, options, path, depth + 1, list->add_items());
    path.resize(base);
    PARITY_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

// An int, which the schema's type hint may say is really a dtype, a layout or a memory format.
absl::Status EncodeInt(int64_t i, const c10::Type* bare_hint, absl::string_view path,
                       v1::Value* out) {
  const auto kind = bare_hint == nullptr ? c10::TypeKind::AnyType : bare_hint->kind();
  if (kind == c10::TypeKind::ScalarTypeType) {
    std::optional<v1::DType> d;
    if (i >= 0 && i < static_cast<int64_t>(c10::ScalarType::NumOptions)) {
      d = ToWireDType(static_cast<c10::ScalarType>(i));
    }
    if (!d) return absl::UnimplementedError(absl::StrCat(path, ": dtype ", i, " not supported"));
    out->set_dtype(*d);
  } else if (kind == c10::TypeKind::LayoutType) {
    std::optional<v1::Layout> l = ToWireLayout(static_cast<c10::Layout>(i));
    if (!l) return absl::UnimplementedError(absl::StrCat(path, ": layout ", i, " not supported"));
    out->set_layout(*l);
  } else if (kind == c10::TypeKind::MemoryFormatType) {
    std::optional<v1::MemoryFormat> m = ToWireMemoryFormat(static_cast<c10::MemoryFormat>(i));
    if (!m) {
      return absl::UnimplementedError(absl::StrCat(path, ": memory format ", i, " unsupported"));
    }
    out->set_memory_format(*m);
  } else {
    out->set_int_value(i);
  }
  return absl::OkStatus();
}

// The kind a list travels as: libtorch types its lists, and schemas accept only their own kind.
v1::ListKind ListKindOf(const c10::IValue& v) {
  if (v.isIntList()) return v1::LIST_KIND_INT;
  if (v.isDoubleList()) return v1::LIST_KIND_DOUBLE;
  if (v.isBoolList()) return v1::LIST_KIND_BOOL;
  if (v.isTensorList()) return v1::LIST_KIND_TENSOR;
  if (v.isComplexDoubleList()) return v1::LIST_KIND_COMPLEX;
  const c10::TypePtr elem = v.toList().elementType();
  if (elem->kind() == c10::TypeKind::OptionalType &&
      elem->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType) {
    return v1::LIST_KIND_OPTIONAL_TENSOR;
  }
  if (elem->kind() == c10::TypeKind::StringType) return v1::LIST_KIND_STRING;
  return v1::LIST_KIND_GENERIC;
}

// A value that is not a tensor, an int or a container.
absl::Status EncodePlain(const c10::IValue& v, absl::string_view path, v1::Value* out) {
  if (v.isNone()) {
    out->mutable_none();
  } else if (v.isSymInt()) {
    // Symbolic ints appear under torch.compile tracing; only concrete ones can be replayed.
    const c10::SymInt s = v.toSymInt();
    if (s.is_symbolic()) {
      return absl::UnimplementedError(absl::StrCat(path, ": symbolic int cannot be sent"));
    }
    out->set_int_value(s.expect_int());
  } else if (v.isDouble()) {
    out->set_double_value(v.toDouble());
  } else if (v.isBool()) {
    out->set_bool_value(v.toBool());
  } else if (v.isString()) {
    if (!IsValidUtf8(v.toStringRef())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": string is not valid UTF-8"));
    }
    out->set_string_value(v.toStringRef());
  } else if (v.isComplexDouble()) {
    const c10::complex<double> c = v.toComplexDouble();
    out->mutable_complex_value()->set_real(c.real());
    out->mutable_complex_value()->set_imag(c.imag());
  } else if (v.isDevice()) {
    const c10::Device d = v.toDevice();
    out->mutable_device()->set_type(c10::DeviceTypeName(d.type(), /*lower_case=*/true));
    out->mutable_device()->set_index(d.has_index() ? d.index() : -1);
  } else {
    return absl::UnimplementedError(
        absl::StrCat(path, ": a value of type ", v.tagKind(), " cannot be sent"));
  }
  return absl::OkStatus();
}

absl::Status EncodeImpl(const c10::IValue& v, const c10::Type* hint, const EncodeOptions& options,
                        std::string& path, uint32_t depth, v1::Value* out) {
  if (depth > options.max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": nesting deeper than ", options.max_depth));
  }
  if (v.isTensor()) return EncodeTensor(v.toTensor(), options, path, out->mutable_tensor());
  if (v.isInt()) return EncodeInt(v.toInt(), Unwrap(hint), path, out);
  if (v.isTuple()) {
    v1::ValueList* list = out->mutable_list();
    list->set_kind(v1::LIST_KIND_TUPLE);
    return EncodeItems(v.toTupleRef().elements(), nullptr, options, path, depth, list);
  }
  if (v.isList()) {
    v1::ValueList* list = out->mutable_list();
    list->set_kind(ListKindOf(v));
    return EncodeItems(v.toListRef(), ListElementHint(hint), options, path, depth, list);
  }
  return EncodePlain(v, path, out);
}

}  // namespace

absl::Status EncodeValue(const c10::IValue& value, const c10::Type* type_hint,
                         const EncodeOptions& options, absl::string_view path, v1::Value* out) {
  std::string p(path);
  try {
    return EncodeImpl(value, type_hint, options, p, 0, out);
  } catch (const std::exception& e) {
    // libtorch throws c10::Error (a std::exception) from copies and conversions.
    return absl::InternalError(absl::StrCat(p, ": libtorch failed while encoding: ", e.what()));
  }
}

}  // namespace parity::common
