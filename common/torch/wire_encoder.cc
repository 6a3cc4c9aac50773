// common/torch/wire_encoder.h: c10::IValue -> parity.v1.Value wire bytes.
#include "common/torch/wire_encoder.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/torch/tensor_stats.h"
#include "common/torch/torch_pch.h"
#include "common/torch/wire_enums.h"
#include "common/wire/crc32c.h"
#include "common/wire/fields.h"

namespace parity::common {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; big-endian hosts need byte swapping");

constexpr int kInvalidArgument = 3, kUnimplemented = 12, kInternal = 13;

EncodeError Error(int code, std::string message) { return {code, std::move(message)}; }

// Protobuf `string` fields must hold UTF-8, and a message with invalid UTF-8 fails to parse on the
// other side, which would lose the whole call; such strings are refused at encode time.
bool IsValidUtf8(std::string_view s) {
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

struct Encoder {
  const EncodeOptions& options;
  std::vector<c10::IValue>* keep_alive;
  std::string path;

  // A TensorStats message (proto3: zeros left out).
  static void WriteStats(const TensorStatsValues& s, wire::Message& m) {
    auto dbl = [&m](uint32_t field, double v) {
      if (v != 0.0 || std::signbit(v)) m.Double(field, v);
    };
    if (s.any_finite) {
      dbl(wire::kStatsMin, s.min);
      dbl(wire::kStatsMax, s.max);
      dbl(wire::kStatsMean, s.mean);
      dbl(wire::kStatsL2Norm, s.l2_norm);
    }
    if (s.nan_count != 0) m.Varint(wire::kStatsNanCount, s.nan_count);
    if (s.inf_count != 0) m.Varint(wire::kStatsInfCount, s.inf_count);
  }

  // Why `tensor` cannot be sent (its layout, dtype, or the server's accepted dtypes), or no
  // error with its wire dtype in `dtype`.
  EncodeError Sendable(const at::Tensor& tensor, wire::DType* wire_dtype) const {
    if (tensor.layout() != c10::kStrided) {
      return Error(kUnimplemented, path + ": tensors with layout " +
                                       c10::toString(tensor.layout()) +
                                       " cannot be sent (only strided tensors)");
    }
    if (tensor.is_quantized())
      return Error(kUnimplemented, path + ": quantized tensors cannot be sent");
    if (tensor.is_meta()) return Error(kUnimplemented, path + ": meta tensors carry no data");
    std::optional<wire::DType> dtype = WireDTypeOf(tensor.scalar_type());
    if (!dtype) {
      return Error(kUnimplemented, path + ": dtype " + c10::toString(tensor.scalar_type()) +
                                       " has no wire representation");
    }
    if (options.accepted_dtypes != nullptr &&
        std::find(options.accepted_dtypes->begin(), options.accepted_dtypes->end(),
                  static_cast<int32_t>(*dtype)) == options.accepted_dtypes->end()) {
      return Error(kUnimplemented, path + ": dtype " +
                                       std::string(c10::toString(tensor.scalar_type())) +
                                       " is not among the server's accepted dtypes");
    }
    *wire_dtype = *dtype;
    return {};
  }

  enum class Form { kReusable, kInline, kBlob, kStats };
  // How a tensor of `bytes` travels: reusable blob, inline, blob, or statistics only.
  Form FormFor(uint64_t bytes) const {
    if (options.blob_sink != nullptr && options.reuse_min_bytes > 0 &&
        bytes >= options.reuse_min_bytes && bytes <= options.max_tensor_bytes) {
      return Form::kReusable;
    }
    if (bytes <= options.max_inline_tensor_bytes) return Form::kInline;
    if (options.blob_sink != nullptr && bytes <= options.max_tensor_bytes) return Form::kBlob;
    return Form::kStats;
  }

  // `tensor`'s values on the host, in its layout: a resolved conjugate or negation is a new tensor.
  static at::Tensor HostOf(const at::Tensor& tensor) {
    at::Tensor host = tensor.detach();
    if (host.is_conj()) host = host.resolve_conj();
    if (host.is_neg()) host = host.resolve_neg();
    return host.is_cpu() ? host : host.to(at::kCPU);
  }

  EncodeError Tensor(const at::Tensor& tensor, wire::Message& out) {
    if (!tensor.defined()) {
      out.Varint(wire::kTensorForm, wire::kFormUndefined);
      return {};
    }
    wire::DType dtype{};
    if (EncodeError e = Sendable(tensor, &dtype); !e.ok()) return e;
    at::Tensor host = HostOf(tensor);
    const uint64_t bytes = static_cast<uint64_t>(host.numel()) * host.element_size();
    const Form form = FormFor(bytes);
    // The tensor's own bytes (a snapshot in the training's layout, say a transposed weight's):
    // named by the id they were sent under before, if the sink still holds it, without being
    // made contiguous or read; else sent, and remembered by the tensor.
    const bool own = tensor.is_cpu() && host.has_storage() && tensor.has_storage() &&
                     host.storage().is_alias_of(tensor.storage());
    uint64_t known = 0;
    if (form == Form::kReusable && own && !options.compute_crc32c) {
      known = options.blob_sink->KnownReusable(host);
    }
    const at::Tensor source = own ? host : at::Tensor();
    if (known == 0) host = host.contiguous();
    const char* data = static_cast<const char*>(host.data_ptr());
    const std::string_view payload(data, bytes);  // row-major, unless named by `known`

    // Fields in ascending number, as protobuf writes them.
    out.Varint(wire::kTensorDType, dtype);
    const std::vector<int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
    out.PackedInts(wire::kTensorShape, shape.data(), shape.size());
    switch (form) {
      case Form::kInline:  // DATA_FORM_INLINE is 0: not written
        if (bytes > 0) {
          out.BorrowedBytes(wire::kTensorData, payload);
          keep_alive->push_back(host);
        }
        break;
      case Form::kReusable:
        out.Varint(wire::kTensorForm, wire::kFormChunked);
        out.Varint(wire::kTensorBlobId,
                   known != 0 ? known : options.blob_sink->AddReusable(payload, source));
        break;
      case Form::kBlob:
        out.Varint(wire::kTensorForm, wire::kFormChunked);
        out.Varint(wire::kTensorBlobId, options.blob_sink->AddBlob(payload));
        break;
      case Form::kStats:
        out.Varint(wire::kTensorForm, wire::kFormStatsOnly);
        WriteStats(TensorStatistics(host), out.Sub(wire::kTensorStats));
        break;
    }
    if (options.compute_crc32c && form != Form::kStats) {
      out.Fixed32(wire::kTensorCrc32c, Crc32c(payload));
    }
    const std::string device = tensor.device().str();
    if (!device.empty()) out.Bytes(wire::kTensorDevice, device);
    const std::vector<int64_t> strides(tensor.strides().begin(), tensor.strides().end());
    out.PackedInts(wire::kTensorOriginalStrides, strides.data(), strides.size());
    if (tensor.requires_grad()) out.Varint(wire::kTensorRequiresGrad, 1);
    return {};
  }

  // An int, which the schema's type hint may say is really a dtype, a layout or a memory format.
  EncodeError Int(int64_t i, const c10::Type* bare_hint, wire::Message& out) {
    const auto kind = bare_hint == nullptr ? c10::TypeKind::AnyType : bare_hint->kind();
    if (kind == c10::TypeKind::ScalarTypeType) {
      std::optional<wire::DType> d;
      if (i >= 0 && i < static_cast<int64_t>(c10::ScalarType::NumOptions)) {
        d = WireDTypeOf(static_cast<c10::ScalarType>(i));
      }
      if (!d)
        return Error(kUnimplemented, path + ": dtype " + std::to_string(i) + " not supported");
      out.Varint(wire::kValueDType, *d);
    } else if (kind == c10::TypeKind::LayoutType) {
      std::optional<wire::Layout> l = WireLayoutOf(static_cast<c10::Layout>(i));
      if (!l)
        return Error(kUnimplemented, path + ": layout " + std::to_string(i) + " not supported");
      out.Varint(wire::kValueLayout, *l);
    } else if (kind == c10::TypeKind::MemoryFormatType) {
      std::optional<wire::MemoryFormat> m = WireMemoryFormatOf(static_cast<c10::MemoryFormat>(i));
      if (!m) {
        return Error(kUnimplemented,
                     path + ": memory format " + std::to_string(i) + " unsupported");
      }
      out.Varint(wire::kValueMemoryFormat, *m);
    } else {
      out.Int(wire::kValueInt, i);
    }
    return {};
  }

  // The kind a list travels as: libtorch types its lists, and schemas accept only their own kind.
  static wire::ListKind ListKindOf(const c10::IValue& v) {
    if (v.isIntList()) return wire::kListInt;
    if (v.isDoubleList()) return wire::kListDouble;
    if (v.isBoolList()) return wire::kListBool;
    if (v.isTensorList()) return wire::kListTensor;
    if (v.isComplexDoubleList()) return wire::kListComplex;
    const c10::TypePtr elem = v.toList().elementType();
    if (elem->kind() == c10::TypeKind::OptionalType &&
        elem->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType) {
      return wire::kListOptionalTensor;
    }
    if (elem->kind() == c10::TypeKind::StringType) return wire::kListString;
    return wire::kListGeneric;
  }

  template <typename Range>
  EncodeError Items(const Range& items, const c10::Type* elem_hint, uint32_t depth,
                    wire::ListKind kind, wire::Message& list) {
    list.Varint(wire::kListKind, kind);
    const std::size_t base = path.size();
    std::size_t i = 0;
    for (const auto& item : items) {
      path += "[" + std::to_string(i++) + "]";
      c10::IValue iv(item);
      EncodeError e = Value(iv, elem_hint, depth + 1, list.Sub(wire::kListItems));
      path.resize(base);
      if (!e.ok()) return e;
    }
    return {};
  }

  // A value that is not a tensor, an int or a container.
  EncodeError Plain(const c10::IValue& v, wire::Message& out) {
    if (v.isNone()) {
      out.Sub(wire::kValueNone);
    } else if (v.isSymInt()) {
      // Symbolic ints appear under torch.compile tracing; only concrete ones can be replayed.
      const c10::SymInt s = v.toSymInt();
      if (s.is_symbolic()) return Error(kUnimplemented, path + ": symbolic int cannot be sent");
      out.Int(wire::kValueInt, s.expect_int());
    } else if (v.isDouble()) {
      out.Double(wire::kValueDouble, v.toDouble());
    } else if (v.isBool()) {
      out.Varint(wire::kValueBool, v.toBool() ? 1 : 0);
    } else if (v.isString()) {
      if (!IsValidUtf8(v.toStringRef())) {
        return Error(kInvalidArgument, path + ": string is not valid UTF-8");
      }
      out.Bytes(wire::kValueString, v.toStringRef());
    } else if (v.isComplexDouble()) {
      const c10::complex<double> c = v.toComplexDouble();
      wire::Message& m = out.Sub(wire::kValueComplex);
      if (c.real() != 0.0 || std::signbit(c.real())) m.Double(wire::kComplexReal, c.real());
      if (c.imag() != 0.0 || std::signbit(c.imag())) m.Double(wire::kComplexImag, c.imag());
    } else if (v.isDevice()) {
      const c10::Device d = v.toDevice();
      wire::Message& m = out.Sub(wire::kValueDevice);
      m.Bytes(wire::kDeviceType, c10::DeviceTypeName(d.type(), /*lower_case=*/true));
      const int64_t index = d.has_index() ? d.index() : -1;
      if (index != 0) m.Int(wire::kDeviceIndex, index);
    } else {
      return Error(kUnimplemented, path + ": a value of type " + v.tagKind() + " cannot be sent");
    }
    return {};
  }

  EncodeError Value(const c10::IValue& v, const c10::Type* hint, uint32_t depth,
                    wire::Message& out) {
    if (depth > options.max_depth) {
      return Error(kInvalidArgument,
                   path + ": nesting deeper than " + std::to_string(options.max_depth));
    }
    if (v.isTensor()) return Tensor(v.toTensor(), out.Sub(wire::kValueTensor));
    if (v.isInt()) return Int(v.toInt(), Unwrap(hint), out);
    if (v.isTuple()) {
      return Items(v.toTupleRef().elements(), nullptr, depth, wire::kListTuple,
                   out.Sub(wire::kValueList));
    }
    if (v.isList()) {
      return Items(v.toListRef(), ListElementHint(hint), depth, ListKindOf(v),
                   out.Sub(wire::kValueList));
    }
    return Plain(v, out);
  }
};

}  // namespace

EncodeError EncodeValueWire(const c10::IValue& value, const c10::Type* type_hint,
                            const EncodeOptions& options, std::string_view path, wire::Message* out,
                            std::vector<c10::IValue>* keep_alive) {
  Encoder e{options, keep_alive, std::string(path)};
  try {
    return e.Value(value, type_hint, 0, *out);
  } catch (const std::exception& ex) {
    // libtorch throws c10::Error (a std::exception) from copies and conversions.
    return Error(kInternal, e.path + ": libtorch failed while encoding: " + ex.what());
  }
}

}  // namespace parity::common
