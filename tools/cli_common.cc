#include "cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

namespace tilefuse::cli {

namespace fs = std::filesystem;

void PrintError(const Status& status) { std::cerr << "error: " << status.ToString() << "\n"; }

bool IsOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

StatusOr<std::map<std::string, int64_t>> ParseShapeFlag(const std::string& text) {
  std::map<std::string, int64_t> dims;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const size_t eq = part.find('=');
    const std::string name = eq == std::string::npos ? "" : part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    size_t used = 0;
    long long n = -1;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (name.empty() || value.empty() || used != value.size() || n < 0)
      return InvalidArgument(fmt::format("--shape: '{}' is not NAME=N with N a non-negative integer (e.g. batch=8,seq=512)", part));
    if (!dims.emplace(name, n).second) return InvalidArgument(fmt::format("--shape: '{}' is given twice", name));
  }
  return dims;
}

StatusOr<ImportedModel> LoadModelWithShapes(const std::string& path, const std::string& shape_flag) {
  ImportOptions shapes;
  ASSIGN_OR_RETURN(shapes.dims, ParseShapeFlag(shape_flag));
  return LoadModel(path, shapes);
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

DumpDirStaging::DumpDirStaging(std::string final_dir) : final_dir_(std::move(final_dir)) {}

DumpDirStaging::~DumpDirStaging() {
  if (staging_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_dir_, ec);  // best effort: nothing to report from a destructor
}

StatusOr<std::string> DumpDirStaging::Prepare() {
  if (final_dir_.empty()) return std::string();
  fs::path final_path = fs::path(final_dir_).lexically_normal();
  if (final_path.filename().empty()) final_path = final_path.parent_path();
  staging_dir_ = fmt::format("{}.partial-{}", final_path.string(), ::getpid());
  std::error_code ec;
  fs::remove_all(staging_dir_, ec);
  if (!fs::create_directories(staging_dir_, ec) || ec) {
    std::string reason = ec ? ec.message() : "it could not be created";
    staging_dir_.clear();
    return InvalidArgument(fmt::format("cannot create the dump folder next to '{}': {}", final_dir_, reason));
  }
  return staging_dir_;
}

Status DumpDirStaging::Publish() {
  if (staging_dir_.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(final_dir_, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create dump folder '{}': {}", final_dir_, ec.message()));
  for (const fs::directory_entry& entry : fs::directory_iterator(staging_dir_, ec)) {
    fs::rename(entry.path(), fs::path(final_dir_) / entry.path().filename(), ec);
    if (ec) return InvalidArgument(fmt::format("cannot move dump '{}' into '{}': {}", entry.path().string(),
                                               final_dir_, ec.message()));
  }
  if (ec) return InvalidArgument(fmt::format("cannot read dump folder '{}': {}", staging_dir_, ec.message()));
  return Status::Ok();
}

}  // namespace tilefuse::cli
