// The one walk over an IValue's containers (tuples, tensor lists, generic lists) that the agent
// (snapshots, host copies, byte counts) and the server (bench and golden copies, dtypes, output
// lists) share. Lists of ints, floats, bools and complex numbers are leaves: they hold no tensor.
#pragma once

#include <utility>
#include <vector>

#include "common/torch/torch_pch.h"

namespace parity::common {

// Whether a walk visits the values inside `v`.
inline bool IsContainer(const c10::IValue& v) {
  if (v.isTuple()) return true;
  if (!v.isList()) return false;
  return !(v.isIntList() || v.isDoubleList() || v.isBoolList() || v.isComplexDoubleList());
}

// Calls `leaf(value)` for every non-container value in `v`, depth first, in order.
template <typename Leaf>
void ForEachLeaf(const c10::IValue& v, const Leaf& leaf) {
  if (v.isTuple()) {
    for (const c10::IValue& item : v.toTupleRef().elements()) ForEachLeaf(item, leaf);
  } else if (IsContainer(v)) {
    for (const c10::IValue& item : v.toListRef()) ForEachLeaf(item, leaf);
  } else {
    leaf(v);
  }
}

// `v` with every non-container value replaced by `leaf(value)`; containers are rebuilt around the
// results with their own kinds (a tensor list stays a tensor list, so schemas still accept it).
template <typename Leaf>
c10::IValue MapLeaves(const c10::IValue& v, const Leaf& leaf) {
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    out.reserve(v.toListRef().size());
    for (const c10::IValue& t : v.toListRef()) out.push_back(leaf(t).toTensor());
    return c10::IValue(std::move(out));
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& item : v.toTupleRef().elements())
      items.push_back(MapLeaves(item, leaf));
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  if (IsContainer(v)) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& item : v.toListRef()) out.push_back(MapLeaves(item, leaf));
    return c10::IValue(std::move(out));
  }
  return leaf(v);
}

}  // namespace parity::common
