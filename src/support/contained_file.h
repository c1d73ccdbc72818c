// Reading a file named by untrusted data (an ONNX model's external-data location) so that
// nothing outside a given folder is ever opened (docs/security.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// `length` bytes from `offset` (nullopt: to the end) of `folder`/`relative`. Four checks,
// as ONNX's own fix for external data through links (CVE-2026-27489), each for a case the
// others could miss:
//  - `relative` is relative and has no '..'; its canonical path lies inside the canonical
//    `folder` (a link anywhere on the way that points out is refused before any open);
//  - no component below `folder` is a symbolic link, the file included (walked with
//    openat from the folder, so a link swapped in after the check is not followed either);
//  - the file is opened with O_NOFOLLOW and must be a regular file with one hard link (a
//    hard link is indistinguishable from the original, so it may be any file of the disk);
//  - its size is checked against offset and length before a byte is read.
// `folder` itself may be or sit below a symbolic link: the user chose it. "" means ".".
// Every refusal is an InvalidArgument naming the file; NotFound when it does not exist.
StatusOr<std::string> ReadContainedFileRange(const std::string& folder, const std::string& relative, uint64_t offset,
                                             std::optional<uint64_t> length);

}  // namespace tilefuse
