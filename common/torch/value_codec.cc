#include "common/torch/value_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "common/tensor_check.h"
#include "common/torch/dtype_map.h"
#include "common/torch/tensor_stats.h"
#include "common/torch/torch_pch.h"

namespace parity::common {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; big-endian hosts need byte swapping");

// ---- small helpers -----------------------------------------------------------------------------

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

std::optional<v1::Layout> ToWireLayout(c10::Layout layout) {
  switch (layout) {
    case c10::kStrided:
      return v1::LAYOUT_STRIDED;
    case c10::kSparse:
      return v1::LAYOUT_SPARSE_COO;
    case c10::kSparseCsr:
      return v1::LAYOUT_SPARSE_CSR;
    case c10::kMkldnn:
      return v1::LAYOUT_MKLDNN;
    default:
      return std::nullopt;
  }
}

std::optional<c10::Layout> FromWireLayout(v1::Layout layout) {
  switch (layout) {
    case v1::LAYOUT_STRIDED:
      return c10::kStrided;
    case v1::LAYOUT_SPARSE_COO:
      return c10::kSparse;
    case v1::LAYOUT_SPARSE_CSR:
      return c10::kSparseCsr;
    case v1::LAYOUT_MKLDNN:
      return c10::kMkldnn;
    default:
      return std::nullopt;
  }
}

std::optional<v1::MemoryFormat> ToWireMemoryFormat(c10::MemoryFormat format) {
  switch (format) {
    case c10::MemoryFormat::Contiguous:
      return v1::MEMORY_FORMAT_CONTIGUOUS;
    case c10::MemoryFormat::Preserve:
      return v1::MEMORY_FORMAT_PRESERVE;
    case c10::MemoryFormat::ChannelsLast:
      return v1::MEMORY_FORMAT_CHANNELS_LAST;
    case c10::MemoryFormat::ChannelsLast3d:
      return v1::MEMORY_FORMAT_CHANNELS_LAST_3D;
    default:
      return std::nullopt;
  }
}

std::optional<c10::MemoryFormat> FromWireMemoryFormat(v1::MemoryFormat format) {
  switch (format) {
    case v1::MEMORY_FORMAT_CONTIGUOUS:
      return c10::MemoryFormat::Contiguous;
    case v1::MEMORY_FORMAT_PRESERVE:
      return c10::MemoryFormat::Preserve;
    case v1::MEMORY_FORMAT_CHANNELS_LAST:
      return c10::MemoryFormat::ChannelsLast;
    case v1::MEMORY_FORMAT_CHANNELS_LAST_3D:
      return c10::MemoryFormat::ChannelsLast3d;
    default:
      return std::nullopt;
  }
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

  if (bytes <= options.max_inline_tensor_bytes) {
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

absl::Status EncodeImpl(const c10::IValue& v, const c10::Type* hint, const EncodeOptions& options,
                        std::string& path, uint32_t depth, v1::Value* out) {
  if (depth > options.max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": nesting deeper than ", options.max_depth));
  }
  const c10::Type* bare = Unwrap(hint);
  if (v.isNone()) {
    out->mutable_none();
  } else if (v.isTensor()) {
    return EncodeTensor(v.toTensor(), options, path, out->mutable_tensor());
  } else if (v.isInt()) {
    const int64_t i = v.toInt();
    const auto kind = bare == nullptr ? c10::TypeKind::AnyType : bare->kind();
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
  } else if (v.isTuple()) {
    v1::ValueList* list = out->mutable_list();
    list->set_kind(v1::LIST_KIND_TUPLE);
    return EncodeItems(v.toTupleRef().elements(), nullptr, options, path, depth, list);
  } else if (v.isList()) {
    v1::ValueList* list = out->mutable_list();
    const c10::Type* elem_hint = ListElementHint(hint);
    if (v.isIntList()) {
      list->set_kind(v1::LIST_KIND_INT);
    } else if (v.isDoubleList()) {
      list->set_kind(v1::LIST_KIND_DOUBLE);
    } else if (v.isBoolList()) {
      list->set_kind(v1::LIST_KIND_BOOL);
    } else if (v.isTensorList()) {
      list->set_kind(v1::LIST_KIND_TENSOR);
    } else if (v.isComplexDoubleList()) {
      list->set_kind(v1::LIST_KIND_COMPLEX);
    } else {
      const c10::TypePtr elem = v.toList().elementType();
      if (elem->kind() == c10::TypeKind::OptionalType &&
          elem->castRaw<c10::OptionalType>()->getElementType()->kind() ==
              c10::TypeKind::TensorType) {
        list->set_kind(v1::LIST_KIND_OPTIONAL_TENSOR);
      } else if (elem->kind() == c10::TypeKind::StringType) {
        list->set_kind(v1::LIST_KIND_STRING);
      } else {
        list->set_kind(v1::LIST_KIND_GENERIC);
      }
    }
    return EncodeItems(v.toListRef(), elem_hint, options, path, depth, list);
  } else {
    return absl::UnimplementedError(
        absl::StrCat(path, ": a value of type ", v.tagKind(), " cannot be sent"));
  }
  return absl::OkStatus();
}

// Element type of a decoded generic list: the unified type of its items, Any when they disagree
// or the list is empty.
c10::TypePtr UnifiedElementType(const std::vector<c10::IValue>& items) {
  if (items.empty()) return c10::AnyType::get();
  c10::TypePtr t = items[0].type();
  for (std::size_t i = 1; i < items.size(); ++i) {
    auto u = c10::unifyTypes(t, items[i].type());
    if (!u) return c10::AnyType::get();
    t = *u;
  }
  return t;
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

// ---- decoding ----------------------------------------------------------------------------------

absl::Status ValueDecoder::Decode(const v1::Value& value, absl::string_view path,
                                  c10::IValue* out) {
  std::string p(path);
  try {
    return DecodeAt(value, p, 0, out);
  } catch (const std::exception& e) {
    // Allocation failure or a libtorch error after validation: report, never propagate.
    return absl::ResourceExhaustedError(absl::StrCat(p, ": decoding failed: ", e.what()));
  }
}

absl::Status ValueDecoder::DecodeTensor(const v1::Tensor& t, const std::string& path,
                                        c10::IValue* out) {
  if (t.form() == v1::DATA_FORM_UNDEFINED) {
    *out = c10::IValue(at::Tensor());
    return absl::OkStatus();
  }
  PARITY_ASSIGN_OR_RETURN(const TensorExtent extent, CheckTensor(t, limits_, path));
  if (t.form() == v1::DATA_FORM_STATS_ONLY) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": tensor ", ShapeString(t.shape()), " was sent as statistics only"));
  }
  absl::string_view payload = t.data();
  if (t.form() == v1::DATA_FORM_CHUNKED) {
    const std::string* blob = blobs_ == nullptr ? nullptr : blobs_->FindBlob(t.blob_id());
    if (blob == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".blob_id: no chunks were received for blob ", t.blob_id()));
    }
    if (blob->size() != extent.bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ".blob_id: blob ", t.blob_id(),
                                                     " holds ", blob->size(), " bytes, expected ",
                                                     extent.bytes));
    }
    if (t.has_crc32c() && Crc32c(*blob) != t.crc32c()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".crc32c: checksum mismatch for blob ", t.blob_id()));
    }
    payload = *blob;
  }
  if (extent.bytes > limits_.max_call_bytes - std::min(bytes_decoded_, limits_.max_call_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": ", extent.bytes, " more tensor bytes would bring the call to ",
        bytes_decoded_ + extent.bytes, ", over max_call_bytes ", limits_.max_call_bytes));
  }
  if (t.dtype() == v1::DTYPE_BOOL) {
    // Bytes other than 0/1 are undefined behaviour for libtorch's bool kernels.
    for (std::size_t i = 0; i < payload.size(); ++i) {
      if (static_cast<unsigned char>(payload[i]) > 1) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".data: bool element ", i,
                                                       " has byte value ",
                                                       static_cast<int>(payload[i] & 0xFF)));
      }
    }
  }
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  at::Tensor tensor =
      at::empty(shape, at::TensorOptions().dtype(*ToScalarType(t.dtype())).device(at::kCPU));
  if (extent.bytes > 0) std::memcpy(tensor.data_ptr(), payload.data(), extent.bytes);
  bytes_decoded_ += extent.bytes;
  *out = c10::IValue(std::move(tensor));
  return absl::OkStatus();
}

absl::Status ValueDecoder::DecodeList(const v1::ValueList& list, std::string& path, uint32_t depth,
                                      c10::IValue* out) {
  if (static_cast<uint32_t>(list.items_size()) > limits_.max_list_length) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ".list: ", list.items_size(),
                                                     " items exceed max_list_length ",
                                                     limits_.max_list_length));
  }
  if (!v1::ListKind_IsValid(list.kind()) || list.kind() == v1::LIST_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".list.kind: unknown list kind ", static_cast<int>(list.kind())));
  }
  std::vector<c10::IValue> items;
  items.reserve(list.items_size());
  const std::size_t base = path.size();
  for (int i = 0; i < list.items_size(); ++i) {
    absl::StrAppend(&path, ".list[", i, "]");
    c10::IValue item;
    absl::Status s = DecodeAt(list.items(i), path, depth + 1, &item);
    if (s.ok()) {
      // Typed lists accept only their own item kind.
      const v1::Value::KindCase kc = list.items(i).kind_case();
      bool fits = true;
      switch (list.kind()) {
        case v1::LIST_KIND_INT:
          fits = kc == v1::Value::kIntValue;
          break;
        case v1::LIST_KIND_DOUBLE:
          fits = kc == v1::Value::kDoubleValue;
          break;
        case v1::LIST_KIND_BOOL:
          fits = kc == v1::Value::kBoolValue;
          break;
        case v1::LIST_KIND_TENSOR:
          fits = kc == v1::Value::kTensor;
          break;
        case v1::LIST_KIND_OPTIONAL_TENSOR:
          fits = kc == v1::Value::kTensor || kc == v1::Value::kNone;
          break;
        case v1::LIST_KIND_COMPLEX:
          fits = kc == v1::Value::kComplexValue;
          break;
        case v1::LIST_KIND_STRING:
          fits = kc == v1::Value::kStringValue;
          break;
        default:
          break;
      }
      if (!fits) {
        s = absl::InvalidArgumentError(absl::StrCat(path, ": a ", v1::ListKind_Name(list.kind()),
                                                    " list cannot hold a value of kind ",
                                                    static_cast<int>(kc)));
      }
    }
    path.resize(base);
    PARITY_RETURN_IF_ERROR(s);
    items.push_back(std::move(item));
  }
  switch (list.kind()) {
    case v1::LIST_KIND_INT: {
      c10::List<int64_t> l;
      l.reserve(items.size());
      for (const auto& it : items) l.push_back(it.toInt());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_DOUBLE: {
      c10::List<double> l;
      for (const auto& it : items) l.push_back(it.toDouble());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_BOOL: {
      c10::List<bool> l;
      for (const auto& it : items) l.push_back(it.toBool());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_TENSOR: {
      c10::List<at::Tensor> l;
      for (auto& it : items) l.push_back(std::move(it).toTensor());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_OPTIONAL_TENSOR: {
      c10::List<c10::optional<at::Tensor>> l;
      for (auto& it : items) {
        l.push_back(it.isNone() ? c10::optional<at::Tensor>() : std::move(it).toTensor());
      }
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_COMPLEX: {
      c10::List<c10::complex<double>> l;
      for (const auto& it : items) l.push_back(it.toComplexDouble());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_STRING: {
      c10::List<std::string> l;
      for (const auto& it : items) l.push_back(it.toStringRef());
      *out = c10::IValue(std::move(l));
      break;
    }
    case v1::LIST_KIND_TUPLE:
      *out = c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
      break;
    default: {  // LIST_KIND_GENERIC
      c10::impl::GenericList l(UnifiedElementType(items));
      for (auto& it : items) l.push_back(std::move(it));
      *out = c10::IValue(std::move(l));
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status ValueDecoder::DecodeAt(const v1::Value& value, std::string& path, uint32_t depth,
                                    c10::IValue* out) {
  if (depth > limits_.max_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": nesting depth exceeds max_depth ", limits_.max_depth));
  }
  switch (value.kind_case()) {
    case v1::Value::kTensor:
      return DecodeTensor(value.tensor(), path + ".tensor", out);
    case v1::Value::kIntValue:
      *out = c10::IValue(value.int_value());
      break;
    case v1::Value::kDoubleValue:
      *out = c10::IValue(value.double_value());
      break;
    case v1::Value::kBoolValue:
      *out = c10::IValue(value.bool_value());
      break;
    case v1::Value::kStringValue:
      if (value.string_value().size() > limits_.max_string_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(path, ".string_value: ", value.string_value().size(),
                         " bytes exceed max_string_bytes ", limits_.max_string_bytes));
      }
      *out = c10::IValue(value.string_value());
      break;
    case v1::Value::kNone:
      *out = c10::IValue();
      break;
    case v1::Value::kComplexValue:
      *out = c10::IValue(
          c10::complex<double>(value.complex_value().real(), value.complex_value().imag()));
      break;
    case v1::Value::kDevice: {
      const v1::Device& d = value.device();
      if (d.index() < -1 || d.index() > std::numeric_limits<int8_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".device.index: out of range: ", d.index()));
      }
      try {
        // c10::Device parses "type" or "type:index" and throws on an unknown type.
        const std::string spec = d.index() < 0 ? d.type() : absl::StrCat(d.type(), ":", d.index());
        *out = c10::IValue(c10::Device(spec));
      } catch (const std::exception&) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".device.type: unknown device type '", d.type(), "'"));
      }
      break;
    }
    case v1::Value::kDtype: {
      std::optional<c10::ScalarType> st = ToScalarType(value.dtype());
      if (!st) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".dtype: unknown dtype ", static_cast<int>(value.dtype())));
      }
      *out = c10::IValue(*st);
      break;
    }
    case v1::Value::kLayout: {
      std::optional<c10::Layout> l = FromWireLayout(value.layout());
      if (!l) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".layout: unknown layout ", static_cast<int>(value.layout())));
      }
      *out = c10::IValue(*l);
      break;
    }
    case v1::Value::kMemoryFormat: {
      std::optional<c10::MemoryFormat> m = FromWireMemoryFormat(value.memory_format());
      if (!m) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".memory_format: unknown format ",
                                                       static_cast<int>(value.memory_format())));
      }
      *out = c10::IValue(*m);
      break;
    }
    case v1::Value::kList:
      return DecodeList(value.list(), path, depth, out);
    case v1::Value::KIND_NOT_SET:
      return absl::InvalidArgumentError(absl::StrCat(path, ": value has no kind set"));
  }
  return absl::OkStatus();
}

}  // namespace parity::common
