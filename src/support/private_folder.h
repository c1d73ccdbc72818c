// Private folders: where tilefuse keeps what it later loads (compiled kernels it dlopens,
// cubins, tuning records). Anything another local user could write there would be run
// or trusted by this user's process, so a private folder and each file read from it must
// be owned by the current user and writable by nobody else (docs/security.md).
//
// Checks look at the object itself (lstat, or fstat of a descriptor opened with
// O_NOFOLLOW): a symbolic link is refused, not followed, except where a function says so.
#pragma once

#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// Ok when `path` is a folder owned by the current user and not writable by group or
// others. NotFound when it does not exist; otherwise InvalidArgument naming `path`, what
// is wrong, and the fix. With `allow_link`, `path` may be a symbolic link owned by the
// current user or root (a user pointing a cache elsewhere); the folder it names is checked.
Status CheckPrivateFolder(const std::string& path, bool allow_link = false);
// The same for a regular file (never a link; a hard-linked one is refused too: its other
// name may sit in a folder someone else controls).
Status CheckPrivateFile(const std::string& path);

// Creates `path` with mode 0700 (and any missing parents, 0700 too) and checks it with
// CheckPrivateFolder. Creation is exclusive: mkdir fails with EEXIST on a folder someone
// else made first, and that folder is then checked, never adopted blindly (the /tmp
// fallback of the caches is predictable, so another user may have made it).
Status MakePrivateFolder(const std::string& path, bool allow_link = false);

// The bytes of a file in a private folder: opened with O_NOFOLLOW and checked through its
// descriptor (CheckPrivateFile's rules) before any byte is read. NotFound when absent.
StatusOr<std::string> ReadPrivateFile(const std::string& path);

// What an unusable cache folder costs. When the user chose the folder ($TILEFUSE_CACHE_DIR
// or an option), `problem` is returned as the error. When tilefuse chose it (the default),
// a one-line notice goes to stderr (once per folder and process) and Ok is returned: the
// caller goes on without the cache rather than refusing to compile.
Status RefuseCacheFolder(std::string_view what, const std::string& folder, bool user_chose, const Status& problem);

}  // namespace tilefuse
