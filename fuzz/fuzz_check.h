// The property every importer fuzz target checks besides "no crash, leak or hang": a
// refused input gets a diagnostic with a message, never an empty one. With
// TILEFUSE_FUZZ_VERBOSE=1 in the environment each result is printed (to read what a
// crash input now gets).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "tilefuse/status.h"

namespace tilefuse::fuzzing {

inline void CheckRefusal(const Status& status) {
  static const bool verbose = std::getenv("TILEFUSE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "tilefuse fuzz: %s\n", status.ok() ? "imported" : status.ToString().c_str());
  if (status.ok() || !status.message().empty()) return;
  std::fprintf(stderr, "tilefuse fuzz: refused with an empty message (%s)\n", status.ToString().c_str());
  std::abort();
}

template <typename T>
void CheckRefusal(const StatusOr<T>& result) {
  CheckRefusal(result.status());
}

}  // namespace tilefuse::fuzzing
