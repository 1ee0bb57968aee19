// Our own stand-ins for ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN, which
// Debian 12's Abseil (20220623) does not have. Named so that they can later be
// replaced one for one.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PVDISK_CONCAT_INNER_(a, b) a##b
#define PVDISK_CONCAT_(a, b) PVDISK_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define PVDISK_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status pvdisk_status_ = (expr); !pvdisk_status_.ok()) { \
      return pvdisk_status_;                                          \
    }                                                                 \
  } while (0)

// `PVDISK_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr, or
// returns its error.
#define PVDISK_ASSIGN_OR_RETURN(lhs, expr)                                  \
  PVDISK_ASSIGN_OR_RETURN_IMPL_(PVDISK_CONCAT_(pvdisk_statusor_, __LINE__), \
                                lhs, expr)
#define PVDISK_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
