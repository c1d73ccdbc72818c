#include "backend/cuda/shared_library.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>

namespace tilefuse {

StatusOr<void*> OpenFirstLibrary(const std::string& what, const std::string& env_var,
                                 const std::vector<std::string>& candidates) {
  std::vector<std::string> tried;
  if (const char* forced = std::getenv(env_var.c_str()); forced && *forced) tried.push_back(forced);
  tried.insert(tried.end(), candidates.begin(), candidates.end());
  std::string last_error;
  for (const std::string& path : tried) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    if (const char* e = dlerror()) last_error = e;
  }
  return NotFound(fmt::format("{} not found (tried {}{}; last error: {}); set ${} to its path", what,
                              fmt::join(tried.begin(), tried.begin() + std::min<size_t>(tried.size(), 4), ", "),
                              tried.size() > 4 ? fmt::format(" and {} more", tried.size() - 4) : "", last_error, env_var));
}

std::vector<std::string> CudaLibraryCandidates(const std::string& file) {
  std::vector<std::string> out = {file};
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) out.push_back(fmt::format("{}/lib64/{}", home, file));
  out.push_back("/usr/local/cuda/lib64/" + file);
  for (const char* pattern : {"/usr/local/lib/python3*/dist-packages/nvidia/*/lib/", "/usr/lib/python3/dist-packages/nvidia/*/lib/",
                              "/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib/",
                              "/usr/local/lib/python3*/site-packages/nvidia/*/lib/"}) {
    glob_t found{};
    if (glob(pattern, GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &found) == 0)
      for (size_t i = 0; i < found.gl_pathc; ++i) out.push_back(std::string(found.gl_pathv[i]) + file);
    globfree(&found);
  }
  return out;
}

}  // namespace tilefuse
