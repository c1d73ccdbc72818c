// File helpers shared by every module. Failures are Statuses naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// NotFound when the file does not exist; InvalidArgument when it cannot be read.
StatusOr<std::string> ReadWholeFile(const std::string& path);
// `length` bytes from `offset` (nullopt: to the end). A file shorter than asked for is
// an InvalidArgument, not a short read.
StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset, std::optional<uint64_t> length);
// Writes to a temporary file beside `path` (unique per call), then renames it over
// `path`: a reader never sees half a file and a failure leaves no truncated one. The
// temporary file is created with O_EXCL | O_NOFOLLOW and `mode` (less the umask); caches
// pass 0600.
Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode = 0666);
// The directory of PATH that holds `program`, or "" when it is not on PATH.
std::string FindOnPath(const std::string& program);

}  // namespace tilefuse
