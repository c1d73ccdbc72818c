// Small file helpers for the importer: whole files, byte ranges of external data, and
// atomic writes. Every failure is a Status naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse::onnx_import {

// NotFound when the file does not exist; InvalidArgument when it cannot be read.
StatusOr<std::string> ReadWholeFile(const std::string& path);
// `length` bytes from `offset` (nullopt: to the end). A file shorter than asked for is
// an InvalidArgument, not a short read.
StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset, std::optional<uint64_t> length);
// Writes to a temporary file beside `path`, then renames it over `path`.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace tilefuse::onnx_import
