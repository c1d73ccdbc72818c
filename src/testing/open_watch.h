// OpenWatch: watches one file or folder for opens and reads while alive (inotify; it sees
// this process's own accesses too), so a test can show that something was never opened.
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <string>

namespace tilefuse {

class OpenWatch {
 public:
  explicit OpenWatch(const std::string& path) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0) ::inotify_add_watch(fd_, path.c_str(), IN_OPEN | IN_ACCESS);
  }
  ~OpenWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;
  bool works() const { return fd_ >= 0; }
  // The bytes of events queued since the last call (0: nothing was opened or read).
  ssize_t EventBytes() {
    char buffer[4096];
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    return n < 0 ? 0 : n;
  }
  bool SawAnything() { return EventBytes() > 0; }

 private:
  int fd_;
};

}  // namespace tilefuse
