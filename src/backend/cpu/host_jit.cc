#include "backend/cpu/host_jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "support/file_util.h"

extern char** environ;

namespace tilefuse {

namespace fs = std::filesystem;

namespace {
// Compiler output beyond this is cut (the first errors are the useful ones); the whole
// log stays in the kept folder.
constexpr size_t kMaxReportedOutput = 4000;
// Bump when the way a source becomes a library changes without the flags changing.
constexpr std::string_view kJitFormat = "tilefuse host jit v1";

std::vector<std::string> SplitOnSpaces(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream stream{std::string(text)};
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

// Runs argv (no shell) with stdin from /dev/null and stdout+stderr into `log_path`;
// returns the exit status, or Internal when it could not start or was killed.
StatusOr<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return Internal(fmt::format("cannot start '{}': {}", argv[0], std::strerror(error)));
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return Internal(fmt::format("waiting for '{}' failed: {}", argv[0], std::strerror(errno)));
  }
  if (WIFSIGNALED(wait_status))
    return Internal(fmt::format("'{}' was killed by signal {}", argv[0], WTERMSIG(wait_status)));
  return WEXITSTATUS(wait_status);
}

// A fresh private folder in the system temp directory, e.g. /tmp/tilefuse-jit-Ab12Cd.
StatusOr<std::string> MakeTempFolder() {
  std::error_code ec;
  std::string pattern = (fs::temp_directory_path(ec) / "tilefuse-jit-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    return Internal(fmt::format("cannot create a temporary folder '{}': {}", pattern, std::strerror(errno)));
  return pattern;
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

std::string Trimmed(const std::string& text) {
  if (text.size() <= kMaxReportedOutput) return text;
  return fmt::format("{}\n... ({} more bytes)", text.substr(0, kMaxReportedOutput), text.size() - kMaxReportedOutput);
}

// "<command>: <first line of --version>". Asked once per process per command: starting
// the compiler costs ~10 ms, which a warm (cache hit) compile must not pay.
StatusOr<std::string> CompilerIdentity(const std::vector<std::string>& command) {
  static std::mutex mutex;
  static std::map<std::vector<std::string>, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(command); it != known.end()) return it->second;
  ASSIGN_OR_RETURN(std::string folder, MakeTempFolder());
  std::vector<std::string> argv = command;
  argv.push_back("--version");
  StatusOr<int> exit_code = RunProcess(argv, folder + "/version.txt");
  StatusOr<std::string> output = ReadWholeFile(folder + "/version.txt");
  RemoveTree(folder);
  if (!exit_code.ok()) return exit_code.status();
  std::string joined = fmt::format("{}", fmt::join(command, " "));
  if (*exit_code != 0 || !output.ok())
    return Internal(fmt::format("'{} --version' failed (exit {})", joined, *exit_code));
  std::string first_line = output->substr(0, output->find('\n'));
  return known[command] = fmt::format("{}: {}", joined, first_line);
}

// -march=native makes the same flags mean different code on different hosts (a cache
// folder on a shared home directory sees several), so the host CPU is part of the key:
// its vendor, family, model and feature flags from /proc/cpuinfo (first processor).
const std::string& HostCpuIdentity() {
  static const std::string identity = [] {
    // Streamed line by line: /proc files report no size to seek by.
    std::ifstream cpuinfo("/proc/cpuinfo");
    static const char* const kKeys[] = {"vendor_id", "cpu family", "model", "model name", "flags",
                                        "CPU implementer", "CPU architecture", "CPU part", "Features"};
    std::string result;
    for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {
      std::string key = line.substr(0, line.find(':'));
      key.erase(key.find_last_not_of(" \t") + 1);
      for (const char* wanted : kKeys)
        if (key == wanted) result += line + "\n";
    }
    return result.empty() ? std::string("unknown cpu") : result;
  }();
  return identity;
}

// An OpenMP runtime parks its worker threads inside itself between parallel regions.
// When the host binary does not link one itself (the linker drops an unused -fopenmp),
// the first kernel pulls it in, and dlclose of the last kernel would unmap it under its
// parked threads: they crash on their next wake-up. So once loaded, a runtime stays
// (RTLD_NOLOAD | RTLD_NODELETE marks an already-loaded library; it loads nothing new).
// Kernels themselves may be unloaded: after a parallel region returns, no worker is
// left inside kernel code (the region's closing barrier is in the runtime). Kernels are
// not RTLD_NODELETE because a rebuilt cache entry reuses its path, and dlopen would hand
// back the old, possibly truncated mapping of that path.
void PinOpenMpRuntimes() {
  static const char* const kRuntimes[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
  for (const char* name : kRuntimes)
    if (void* handle = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE)) ::dlclose(handle);
}

StatusOr<std::shared_ptr<const JitLibrary>> LoadLibrary(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return Internal(fmt::format("dlopen('{}') failed: {}", path, error ? error : "unknown error"));
  }
  PinOpenMpRuntimes();
  return std::shared_ptr<const JitLibrary>(std::make_shared<JitLibrary>(handle, path));
}
}  // namespace

// -fno-trapping-math: kernels never read floating-point exception flags, and without it
// GCC will not if-convert a select whose arm multiplies (the multiply might trap), which
// kept dropout's loop, Philox and all, scalar (141 -> 91 ms for 16M elements). Values are
// unchanged: the flag permits speculation, not reassociation.
std::vector<std::string> DefaultHostJitFlags() {
  return {"-O3", "-march=native", "-fno-trapping-math", "-fopenmp", "-shared", "-fPIC", "-std=c++17"};
}

JitLibrary::~JitLibrary() { ::dlclose(handle_); }

StatusOr<void*> JitLibrary::Symbol(std::string_view name) const {
  std::string symbol(name);
  ::dlerror();  // clear a stale error: a symbol may legitimately have address 0
  void* address = ::dlsym(handle_, symbol.c_str());
  if (const char* error = ::dlerror())
    return NotFound(fmt::format("symbol '{}' not found in '{}': {}", symbol, path_, error));
  return address;
}

StatusOr<HostJit> HostJit::Create(HostJitOptions options) {
  std::string compiler = options.compiler;
  if (compiler.empty()) {
    const char* from_env = std::getenv("CXX");
    compiler = from_env && *from_env ? from_env : "c++";
  }
  std::vector<std::string> command = SplitOnSpaces(compiler);
  if (command.empty()) return InvalidArgument("the host compiler command is empty");
  bool has_folder = command[0].find('/') != std::string::npos;
  if (has_folder ? ::access(command[0].c_str(), X_OK) != 0 : FindOnPath(command[0]).empty())
    return NotFound(fmt::format("host compiler '{}' not found{}; set $CXX to a C++ compiler", command[0],
                                has_folder ? "" : " on PATH"));
  ASSIGN_OR_RETURN(std::string identity, CompilerIdentity(command));
  ASSIGN_OR_RETURN(KernelCache cache, KernelCache::Open(options.cache_dir));
  return HostJit(std::move(command), std::move(options.flags), std::move(identity), std::move(cache));
}

std::string HostJit::CacheKey(std::string_view source) const {
  std::vector<std::string_view> parts = {kJitFormat, source, compiler_identity_, HostCpuIdentity()};
  for (const std::string& flag : flags_) parts.push_back(flag);
  return KernelCache::Key(parts);
}

StatusOr<std::shared_ptr<const JitLibrary>> HostJit::Compile(std::string_view source) {
  std::string key = CacheKey(source);
  if (std::optional<std::string> cached = cache_.Lookup(key, ".so")) {
    StatusOr<std::shared_ptr<const JitLibrary>> library = LoadLibrary(*cached);
    if (library.ok()) {
      ++cache_hits_;
      return library;
    }
    // Intact bytes that do not load (say a library it needs was removed): rebuild.
    cache_.Discard(key, ".so", library.status().message());
  }
  // A folder the user chose held an entry someone else could have written: say so now
  // rather than after compiling (docs/security.md).
  RETURN_IF_ERROR(cache_.refusal());
  return CompileAndPublish(source, key);
}

StatusOr<std::string> HostJit::RunCompiler(std::string_view source) const {
  ASSIGN_OR_RETURN(std::string folder, MakeTempFolder());
  std::string source_path = folder + "/kernel.cc", library_path = folder + "/kernel.so";
  std::string log_path = folder + "/compiler.log";
  if (Status written = WriteFileAtomically(source_path, std::string(source)); !written.ok()) {
    RemoveTree(folder);
    return written;
  }
  std::vector<std::string> argv = compiler_command_;
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  argv.insert(argv.end(), {"-o", library_path, source_path});
  StatusOr<int> exit_code = RunProcess(argv, log_path);
  if (exit_code.ok() && *exit_code == 0) return library_path;
  StatusOr<std::string> log = ReadWholeFile(log_path);
  return Internal(fmt::format("host compiler failed{} on {} (kept for debugging; command: {}):\n{}",
                              exit_code.ok() ? fmt::format(" with exit code {}", *exit_code) : "", source_path,
                              fmt::join(argv, " "),
                              exit_code.ok() ? Trimmed(log.ok() ? *log : "(no output)") : exit_code.status().message()));
}

StatusOr<std::shared_ptr<const JitLibrary>> HostJit::CompileAndPublish(std::string_view source,
                                                                      const std::string& key) {
  ++compiles_;
  ASSIGN_OR_RETURN(std::string built, RunCompiler(source));
  std::string folder = fs::path(built).parent_path().string();
  StatusOr<std::string> bytes = ReadWholeFile(built);
  StatusOr<std::string> published = bytes.ok() ? cache_.Insert(key, ".so", *bytes) : bytes.status();
  if (published.ok() && !published->empty()) {
    RemoveTree(folder);
    return LoadLibrary(*published);
  }
  if (published.ok()) {  // the cache is bypassed (an unsafe default folder, noticed once)
    StatusOr<std::shared_ptr<const JitLibrary>> library = LoadLibrary(built);
    RemoveTree(folder);
    return library;
  }
  if (!cache_.refusal().ok()) {
    RemoveTree(folder);
    return cache_.refusal();
  }
  // An unwritable cache must not stop the run: load from the private folder (the mapping
  // outlives the file) and say why the next run will compile again.
  std::fprintf(stderr, "tilefuse: warning: cannot cache the compiled kernel: %s\n",
               published.status().message().c_str());
  StatusOr<std::shared_ptr<const JitLibrary>> library = LoadLibrary(built);
  RemoveTree(folder);
  return library;
}

}  // namespace tilefuse
