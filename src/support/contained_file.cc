#include "support/contained_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

namespace tilefuse {

namespace {

namespace fs = std::filesystem;

// Closes the descriptor it holds; a walk replaces it step by step.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() { Reset(-1); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

bool IsInside(const fs::path& path, const fs::path& folder) {
  auto [folder_end, path_at] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  return folder_end == folder.end();
}

// The components of `relative` to walk, or an error for a location that leaves the folder.
StatusOr<std::vector<std::string>> Components(const std::string& relative, const std::string& shown) {
  fs::path path(relative);
  if (relative.empty()) return InvalidArgument("the file name is empty");
  if (path.is_absolute())
    return InvalidArgument(fmt::format("'{}' must be relative to the model's folder", relative));
  std::vector<std::string> parts;
  for (const fs::path& part : path) {
    if (part == "..") return InvalidArgument(fmt::format("'{}' leaves the model's folder", relative));
    if (part != "." && !part.empty()) parts.push_back(part.string());
  }
  if (parts.empty()) return InvalidArgument(fmt::format("'{}' is a folder, not a file", shown));
  return parts;
}

Status LinkRefused(const std::string& shown) {
  return InvalidArgument(fmt::format("'{}' is a symbolic link; external data must be plain files inside the model's "
                                     "folder (copy the file there instead)",
                                     shown));
}

// Opens `parts` below the open folder `folder_fd`, refusing links at every step. `shown`
// is the path as the user knows it, for messages.
StatusOr<int> OpenBelow(int folder_fd, const std::vector<std::string>& parts, const std::string& folder) {
  Descriptor current(::dup(folder_fd));
  std::string shown = folder;
  for (size_t i = 0; i < parts.size(); ++i) {
    shown += "/" + parts[i];
    const bool last = i + 1 == parts.size();
    struct stat info;
    if (::fstatat(current.get(), parts[i].c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0)
      return errno == ENOENT ? NotFound(fmt::format("file '{}' does not exist", shown))
                             : InvalidArgument(fmt::format("cannot inspect '{}': {}", shown, std::strerror(errno)));
    if (S_ISLNK(info.st_mode)) return LinkRefused(shown);
    if (!last && !S_ISDIR(info.st_mode)) return InvalidArgument(fmt::format("'{}' is not a folder", shown));
    // O_NOFOLLOW again: the link check above and this open are two steps a writer could
    // come between. O_NONBLOCK: a FIFO planted as the file must not hang the import.
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    int next = ::openat(current.get(), parts[i].c_str(), flags);
    if (next < 0) {
      if (errno == ELOOP) return LinkRefused(shown);
      return InvalidArgument(fmt::format("cannot open '{}': {}", shown, std::strerror(errno)));
    }
    current.Reset(next);
  }
  return current.Release();
}

}  // namespace

StatusOr<std::string> ReadContainedFileRange(const std::string& folder, const std::string& relative, uint64_t offset,
                                             std::optional<uint64_t> length) {
  const std::string base = folder.empty() ? "." : folder;
  const std::string shown = (fs::path(base) / relative).string();
  ASSIGN_OR_RETURN(std::vector<std::string> parts, Components(relative, shown));
  std::error_code ec;
  fs::path canonical_folder = fs::canonical(base, ec);
  if (ec) return InvalidArgument(fmt::format("cannot resolve the model's folder '{}': {}", base, ec.message()));
  fs::path resolved = fs::weakly_canonical(canonical_folder / relative, ec);
  if (!ec && !IsInside(resolved, canonical_folder))
    return InvalidArgument(fmt::format("'{}' resolves to '{}', outside the model's folder '{}'", shown,
                                       resolved.string(), canonical_folder.string()));
  Descriptor root(::open(canonical_folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return InvalidArgument(fmt::format("cannot open the folder '{}': {}", base, std::strerror(errno)));
  ASSIGN_OR_RETURN(int opened, OpenBelow(root.get(), parts, base));
  Descriptor file(opened);
  struct stat info;
  if (::fstat(file.get(), &info) != 0)
    return InvalidArgument(fmt::format("cannot inspect '{}': {}", shown, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) return InvalidArgument(fmt::format("'{}' is not a regular file", shown));
  if (info.st_nlink > 1)
    return InvalidArgument(fmt::format("'{}' has {} hard links; external data must be a file of its own (a hard link "
                                       "may be any file of the disk): copy it",
                                       shown, info.st_nlink));
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (offset > size || (length && *length > size - offset))
    return InvalidArgument(fmt::format("file '{}' has {} bytes, but {} bytes from offset {} were expected", shown, size,
                                       length ? std::to_string(*length) : "some", offset));
  std::string bytes(length ? *length : size - offset, '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(file.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return InvalidArgument(fmt::format("reading '{}' failed (did it shrink?)", shown));
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace tilefuse
