#include "support/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace tilefuse {

namespace {
// `open_errno`: errno right after the failed open. It decides "does not exist": asking the
// file system again races with a writer that creates the file in between (a cache reader
// then called a file that appeared a moment later unreadable).
Status OpenError(const std::string& path, int open_errno) {
  std::error_code ec;
  if (open_errno == ENOENT || (open_errno == 0 && !std::filesystem::exists(path, ec)))
    return NotFound(fmt::format("file '{}' does not exist", path));
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument(fmt::format("'{}' is a folder, not a file", path));
  return InvalidArgument(fmt::format("cannot read '{}': {}", path, std::strerror(open_errno)));
}
}  // namespace

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  // Streamed, not sized by seeking: /proc files and pipes report no size.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return OpenError(path, EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError(path, errno);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InvalidArgument(fmt::format("reading '{}' failed", path));
  return bytes;
}

StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset, std::optional<uint64_t> length) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return OpenError(path, EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError(path, errno);
  in.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(in.tellg());
  if (offset > size || (length && *length > size - offset))
    return InvalidArgument(fmt::format("file '{}' has {} bytes, but {} bytes from offset {} were expected", path, size,
                                       length ? std::to_string(*length) : "some", offset));
  uint64_t count = length ? *length : size - offset;
  std::string bytes(count, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(count));
  if (!in) return InvalidArgument(fmt::format("reading '{}' failed", path));
  return bytes;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode) {
  // Unique per call, not just per process: two threads writing one path must not share
  // (and interleave into) one temporary file. O_EXCL | O_NOFOLLOW: a file or link planted
  // at the temporary name (in a folder others can write) is never written through.
  static std::atomic<uint64_t> next_temp_id = 0;
  std::string temp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), next_temp_id++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) return InvalidArgument(fmt::format("cannot write '{}': {}", temp, std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  int error = done == bytes.size() ? 0 : errno;
  if (::close(fd) != 0 && error == 0) error = errno ? errno : EIO;
  if (done != bytes.size() || error != 0) {
    ::unlink(temp.c_str());
    return InvalidArgument(fmt::format("writing '{}' failed: {}", temp, std::strerror(error ? error : EIO)));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temp.c_str());
    return InvalidArgument(fmt::format("cannot rename '{}' to '{}': {}", temp, path, std::strerror(error)));
  }
  return Status::Ok();
}

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::filesystem::path candidate = std::filesystem::path(dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return dir;
  }
  return "";
}

}  // namespace tilefuse
