// Test helpers: structural, bitwise comparison of IValues and random tensor generation.
#pragma once

#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "common/torch/torch_pch.h"
#include "gtest/gtest.h"

namespace parity::testing {

// True when `a` and `b` have the same kind, list element types, dtypes, shapes and the same bytes
// (doubles compared bit for bit, so NaN payloads and -0.0 count). Explains a difference in `why`.
inline bool BitwiseEqual(const c10::IValue& a, const c10::IValue& b, std::string* why,
                         const std::string& path = "value") {
  auto fail = [&](const std::string& m) {
    *why = path + ": " + m;
    return false;
  };
  if (a.tagKind() != b.tagKind()) return fail("kind " + a.tagKind() + " vs " + b.tagKind());
  if (a.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    if (x.defined() != y.defined()) return fail("definedness differs");
    if (!x.defined()) return true;
    if (x.scalar_type() != y.scalar_type()) return fail("dtype differs");
    if (x.sizes() != y.sizes()) return fail("shape differs");
    at::Tensor cx = x.resolve_conj().resolve_neg().contiguous();
    at::Tensor cy = y.resolve_conj().resolve_neg().contiguous();
    const size_t n = cx.numel() * cx.element_size();
    if (n > 0 && std::memcmp(cx.data_ptr(), cy.data_ptr(), n) != 0) return fail("bytes differ");
    return true;
  }
  if (a.isDouble()) {
    double x = a.toDouble(), y = b.toDouble();
    return std::memcmp(&x, &y, sizeof x) == 0 ? true : fail("double bits differ");
  }
  if (a.isComplexDouble()) {
    auto x = a.toComplexDouble(), y = b.toComplexDouble();
    return std::memcmp(&x, &y, sizeof x) == 0 ? true : fail("complex bits differ");
  }
  if (a.isList()) {
    if (a.isIntList() != b.isIntList() || a.isDoubleList() != b.isDoubleList() ||
        a.isBoolList() != b.isBoolList() || a.isTensorList() != b.isTensorList() ||
        a.isComplexDoubleList() != b.isComplexDoubleList()) {
      return fail("list kind differs");
    }
    const auto ta = a.toList().elementType()->str();
    const auto tb = b.toList().elementType()->str();
    if (ta != tb) return fail("list element type " + ta + " vs " + tb);
    auto la = a.toListRef();
    auto lb = b.toListRef();
    if (la.size() != lb.size()) return fail("list length differs");
    for (size_t i = 0; i < la.size(); ++i) {
      if (!BitwiseEqual(la[i], lb[i], why, path + "[" + std::to_string(i) + "]")) return false;
    }
    return true;
  }
  if (a.isTuple()) {
    const auto& ea = a.toTupleRef().elements();
    const auto& eb = b.toTupleRef().elements();
    if (ea.size() != eb.size()) return fail("tuple length differs");
    for (size_t i = 0; i < ea.size(); ++i) {
      if (!BitwiseEqual(ea[i], eb[i], why, path + "[" + std::to_string(i) + "]")) return false;
    }
    return true;
  }
  if (a.isString()) return a.toStringRef() == b.toStringRef() ? true : fail("string differs");
  if (a.isDevice()) return a.toDevice() == b.toDevice() ? true : fail("device differs");
  if (a.isInt()) return a.toInt() == b.toInt() ? true : fail("int differs");
  if (a.isBool()) return a.toBool() == b.toBool() ? true : fail("bool differs");
  if (a.isNone()) return true;
  return fail("unsupported kind in comparison: " + a.tagKind());
}

// A tensor of `dtype` and `shape` whose bytes are random (so every bit pattern — NaN payloads,
// -0.0, infinities, subnormals — can occur); bools are 0/1.
inline at::Tensor RandomBitsTensor(std::mt19937_64& rng, at::ScalarType dtype,
                                   at::IntArrayRef shape) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  const size_t n = t.numel() * t.element_size();
  for (size_t i = 0; i < n; ++i) {
    p[i] = dtype == at::kBool ? static_cast<unsigned char>(rng() & 1)
                              : static_cast<unsigned char>(rng());
  }
  return t;
}

}  // namespace parity::testing
