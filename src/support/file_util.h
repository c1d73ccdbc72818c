// File helpers shared by every module. Failures are Statuses naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// Writes to a temporary file beside `path` (unique per process), then renames it over
// `path`: a reader never sees half a file and a failure leaves no truncated one.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);
// The directory of PATH that holds `program`, or "" when it is not on PATH.
std::string FindOnPath(const std::string& program);

}  // namespace tilefuse
