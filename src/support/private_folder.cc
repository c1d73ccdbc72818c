#include "support/private_folder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

namespace tilefuse {

namespace {

constexpr mode_t kWritableByOthers = S_IWGRP | S_IWOTH;

Status NotPrivate(const std::string& path, const std::string& problem, const std::string& fix) {
  return InvalidArgument(fmt::format("'{}' {}: another user could plant code or data that tilefuse would trust; {}",
                                     path, problem, fix));
}

// The ownership and mode rules, on a stat already taken (of the object, not a link's target).
Status CheckOwnerAndMode(const std::string& path, const struct stat& info, bool is_folder) {
  const uid_t me = ::geteuid();
  if (info.st_uid != me)
    return NotPrivate(path, fmt::format("is owned by uid {}, not by you (uid {})", info.st_uid, me),
                      "remove it, or choose a folder of your own (e.g. $TILEFUSE_CACHE_DIR)");
  if ((info.st_mode & kWritableByOthers) != 0)
    return NotPrivate(path, fmt::format("is writable by group or others (mode {:04o})", info.st_mode & 07777),
                      fmt::format("fix it with `chmod go-w '{}'`{}", path, is_folder ? " and check what is inside" : ""));
  if (!is_folder && info.st_nlink > 1)
    return NotPrivate(path, fmt::format("has {} hard links", info.st_nlink), "remove it; tilefuse rebuilds it");
  return Status::Ok();
}

Status StatError(const std::string& path, int error) {
  if (error == ENOENT) return NotFound(fmt::format("'{}' does not exist", path));
  return InvalidArgument(fmt::format("cannot inspect '{}': {}", path, std::strerror(error)));
}

// mkdir -p with mode 0700 for every folder it makes. EEXIST is not an error here: the
// caller checks the final folder, whoever made it.
Status MakeFolders(const std::filesystem::path& path) {
  std::filesystem::path parent = path.parent_path();
  struct stat info;
  if (!parent.empty() && parent != path && ::stat(parent.c_str(), &info) != 0) RETURN_IF_ERROR(MakeFolders(parent));
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return InvalidArgument(fmt::format("cannot create the folder '{}': {}", path.string(), std::strerror(errno)));
  return Status::Ok();
}

}  // namespace

Status CheckPrivateFolder(const std::string& path, bool allow_link) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return StatError(path, errno);
  if (S_ISLNK(info.st_mode)) {
    if (!allow_link) return NotPrivate(path, "is a symbolic link", "remove it; tilefuse recreates the folder");
    // The link is an entry of its parent; its owner can repoint it at will.
    if (info.st_uid != ::geteuid() && info.st_uid != 0)
      return NotPrivate(path, fmt::format("is a symbolic link owned by uid {}", info.st_uid),
                        "remove it, or choose a folder of your own (e.g. $TILEFUSE_CACHE_DIR)");
    if (::stat(path.c_str(), &info) != 0) return StatError(path, errno);
  }
  if (!S_ISDIR(info.st_mode)) return InvalidArgument(fmt::format("'{}' is not a folder", path));
  return CheckOwnerAndMode(path, info, /*is_folder=*/true);
}

Status CheckPrivateFile(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return StatError(path, errno);
  if (S_ISLNK(info.st_mode)) return NotPrivate(path, "is a symbolic link", "remove it; tilefuse rebuilds it");
  if (!S_ISREG(info.st_mode)) return InvalidArgument(fmt::format("'{}' is not a regular file", path));
  return CheckOwnerAndMode(path, info, /*is_folder=*/false);
}

Status MakePrivateFolder(const std::string& path, bool allow_link) {
  if (path.empty()) return InvalidArgument("the folder name is empty");
  RETURN_IF_ERROR(MakeFolders(std::filesystem::path(path)));
  Status checked = CheckPrivateFolder(path, allow_link);
  if (checked.code() == StatusCode::kNotFound)  // removed between mkdir and lstat
    return InvalidArgument(fmt::format("cannot create the folder '{}': it keeps disappearing", path));
  return checked;
}

StatusOr<std::string> ReadPrivateFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return NotPrivate(path, "is a symbolic link", "remove it; tilefuse rebuilds it");
    return StatError(path, errno);
  }
  struct stat info;
  Status checked = ::fstat(fd, &info) != 0 ? StatError(path, errno)
                   : !S_ISREG(info.st_mode) ? InvalidArgument(fmt::format("'{}' is not a regular file", path))
                                            : CheckOwnerAndMode(path, info, /*is_folder=*/false);
  std::string bytes;
  if (checked.ok()) {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (done != bytes.size()) checked = InvalidArgument(fmt::format("reading '{}' failed or it shrank", path));
  }
  ::close(fd);
  if (!checked.ok()) return checked;
  return bytes;
}

Status RefuseCacheFolder(std::string_view what, const std::string& folder, bool user_chose, const Status& problem) {
  if (user_chose) return Status(problem.code(), fmt::format("{} '{}': {}", what, folder, problem.message()));
  static std::mutex mutex;
  static std::set<std::string> noticed;
  std::lock_guard<std::mutex> lock(mutex);
  if (noticed.insert(folder).second)
    std::fprintf(stderr, "tilefuse: notice: not using the %.*s '%s' (%s); compiling without it\n",
                 static_cast<int>(what.size()), what.data(), folder.c_str(), problem.message().c_str());
  return Status::Ok();
}

}  // namespace tilefuse
