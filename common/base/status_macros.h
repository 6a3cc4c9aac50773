// Status propagation helpers for absl::Status / absl::StatusOr.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PARITY_CONCAT_INNER_(a, b) a##b
#define PARITY_CONCAT_(a, b) PARITY_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function when not OK.
#define PARITY_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status parity_status_ = (expr);          \
    if (!parity_status_.ok()) return parity_status_; \
  } while (false)

// `PARITY_ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of an absl::StatusOr or returns its
// status from the enclosing function.
#define PARITY_ASSIGN_OR_RETURN(lhs, expr) \
  PARITY_ASSIGN_OR_RETURN_IMPL_(PARITY_CONCAT_(parity_statusor_, __LINE__), lhs, expr)
#define PARITY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
