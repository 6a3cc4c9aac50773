// The decoding half of common/torch/value_codec.h: parity.v1.Value -> c10::IValue, every size
// validated before anything is allocated.
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/parallel.h"
#include "common/base/status_macros.h"
#include "common/torch/dtype_map.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "common/wire/crc32c.h"
#include "common/wire/dtype.h"
#include "common/wire/tensor_check.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {
namespace {

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

// A device, dtype, layout or memory format.
absl::Status DecodeEnum(const v1::Value& value, const std::string& path, c10::IValue* out) {
  switch (value.kind_case()) {
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
      return absl::OkStatus();
    }
    case v1::Value::kDtype: {
      std::optional<c10::ScalarType> st = ToScalarType(static_cast<wire::DType>(value.dtype()));
      if (!st) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".dtype: unknown dtype ", static_cast<int>(value.dtype())));
      }
      *out = c10::IValue(*st);
      return absl::OkStatus();
    }
    case v1::Value::kLayout: {
      std::optional<c10::Layout> l = FromWireLayout(static_cast<wire::Layout>(value.layout()));
      if (!l) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".layout: unknown layout ", static_cast<int>(value.layout())));
      }
      *out = c10::IValue(*l);
      return absl::OkStatus();
    }
    case v1::Value::kMemoryFormat: {
      std::optional<c10::MemoryFormat> m =
          FromWireMemoryFormat(static_cast<wire::MemoryFormat>(value.memory_format()));
      if (!m) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".memory_format: unknown format ",
                                                       static_cast<int>(value.memory_format())));
      }
      *out = c10::IValue(*m);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(path, ": not an enum value"));
  }
}

// Whether a typed list of `kind` may hold an item of `item` kind (generic lists and tuples hold
// anything).
bool ItemFits(v1::ListKind kind, v1::Value::KindCase item) {
  switch (kind) {
    case v1::LIST_KIND_INT:
      return item == v1::Value::kIntValue;
    case v1::LIST_KIND_DOUBLE:
      return item == v1::Value::kDoubleValue;
    case v1::LIST_KIND_BOOL:
      return item == v1::Value::kBoolValue;
    case v1::LIST_KIND_TENSOR:
      return item == v1::Value::kTensor;
    case v1::LIST_KIND_OPTIONAL_TENSOR:
      return item == v1::Value::kTensor || item == v1::Value::kNone;
    case v1::LIST_KIND_COMPLEX:
      return item == v1::Value::kComplexValue;
    case v1::LIST_KIND_STRING:
      return item == v1::Value::kStringValue;
    default:
      return true;
  }
}

template <typename T, typename Get>
c10::IValue TypedList(std::vector<c10::IValue>& items, const Get& get) {
  c10::List<T> l;
  l.reserve(items.size());
  for (c10::IValue& it : items) l.push_back(get(it));
  return c10::IValue(std::move(l));
}

// The libtorch list of `kind` holding `items` (each already checked by ItemFits).
c10::IValue BuildList(v1::ListKind kind, std::vector<c10::IValue> items) {
  switch (kind) {
    case v1::LIST_KIND_INT:
      return TypedList<int64_t>(items, [](c10::IValue& v) { return v.toInt(); });
    case v1::LIST_KIND_DOUBLE:
      return TypedList<double>(items, [](c10::IValue& v) { return v.toDouble(); });
    case v1::LIST_KIND_BOOL:
      return TypedList<bool>(items, [](c10::IValue& v) { return v.toBool(); });
    case v1::LIST_KIND_TENSOR:
      return TypedList<at::Tensor>(items, [](c10::IValue& v) { return std::move(v).toTensor(); });
    case v1::LIST_KIND_OPTIONAL_TENSOR:
      return TypedList<c10::optional<at::Tensor>>(items, [](c10::IValue& v) {
        return v.isNone() ? c10::optional<at::Tensor>() : std::move(v).toTensor();
      });
    case v1::LIST_KIND_COMPLEX:
      return TypedList<c10::complex<double>>(items,
                                             [](c10::IValue& v) { return v.toComplexDouble(); });
    case v1::LIST_KIND_STRING:
      return TypedList<std::string>(items, [](c10::IValue& v) { return v.toStringRef(); });
    case v1::LIST_KIND_TUPLE:
      return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
    default: {  // LIST_KIND_GENERIC
      c10::impl::GenericList l(UnifiedElementType(items));
      for (c10::IValue& it : items) l.push_back(std::move(it));
      return c10::IValue(std::move(l));
    }
  }
}

}  // namespace

// ---- decoding ----------------------------------------------------------------------------------

absl::Status ValueDecoder::Decode(const v1::Value& value, absl::string_view path,
                                  c10::IValue* out) {
  std::string p(path);
  try {
    return DecodeAt(value, p, 0, out);
  } catch (const std::bad_alloc& e) {
    // The server's own memory, not the call's size (validated before): the checker answers
    // SKIP, RESOURCE_EXHAUSTED (kOutOfMemoryDecoding), not a rejection of the call.
    return absl::ResourceExhaustedError(
        absl::StrCat(p, ": ", kOutOfMemoryDecoding, " (", e.what(), ")"));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("can't allocate memory") != std::string::npos ||
        what.find("out of memory") != std::string::npos) {
      return absl::ResourceExhaustedError(
          absl::StrCat(p, ": ", kOutOfMemoryDecoding, " (", what, ")"));
    }
    // A libtorch error after validation: the server's failure, reported, never propagated.
    return absl::InternalError(absl::StrCat(p, ": decoding failed: ", what));
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
          absl::StrCat(path, ".blob_id: no chunks were received for blob ", t.blob_id(),
                       ", and the call lists no kept blob of that id"));
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
      at::empty(shape, at::TensorOptions()
                           .dtype(*ToScalarType(static_cast<wire::DType>(t.dtype())))
                           .device(at::kCPU)
                           .pinned_memory(pinned_ && extent.bytes > 0));
  // Large tensors split over the decode threads where the host has cores to spare (the copy
  // was most of a GPU bench's check: docs/deploy.md#gpu-hosts).
  ParallelCopy(tensor.data_ptr(), payload.data(), extent.bytes, DecodeThreads());
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
    if (s.ok() && !ItemFits(list.kind(), list.items(i).kind_case())) {
      // Typed lists accept only their own item kind.
      s = absl::InvalidArgumentError(absl::StrCat(path, ": a ", v1::ListKind_Name(list.kind()),
                                                  " list cannot hold a value of kind ",
                                                  static_cast<int>(list.items(i).kind_case())));
    }
    path.resize(base);
    PARITY_RETURN_IF_ERROR(s);
    items.push_back(std::move(item));
  }
  *out = BuildList(list.kind(), std::move(items));
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
    case v1::Value::kDevice:
    case v1::Value::kDtype:
    case v1::Value::kLayout:
    case v1::Value::kMemoryFormat:
      return DecodeEnum(value, path, out);
    case v1::Value::kList:
      return DecodeList(value.list(), path, depth, out);
    case v1::Value::KIND_NOT_SET:
      return absl::InvalidArgumentError(absl::StrCat(path, ": value has no kind set"));
  }
  return absl::OkStatus();
}

}  // namespace parity::common
