#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
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

namespace {

// A non-negative integer, the whole of `text`.
std::optional<int64_t> NonNegative(const std::string& text) {
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size() || n < 0) return std::nullopt;
  return n;
}

}  // namespace

StatusOr<ShapeFlag> ParseShapeFlag(const std::string& text) {
  ShapeFlag flag;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const size_t eq = part.find('=');
    const std::string name = eq == std::string::npos ? "" : part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    std::vector<std::optional<int64_t>> bounds;
    for (size_t from = 0;;) {
      const size_t dots = value.find("..", from);
      bounds.push_back(NonNegative(value.substr(from, dots == std::string::npos ? std::string::npos : dots - from)));
      if (dots == std::string::npos) break;
      from = dots + 2;
    }
    const bool numbers = std::all_of(bounds.begin(), bounds.end(), [](const auto& b) { return b.has_value(); });
    if (name.empty() || !numbers || bounds.size() > 3)
      return InvalidArgument(fmt::format("--shape: '{}' is not NAME=N, NAME=MIN..MAX or NAME=MIN..TYPICAL..MAX with non-negative "
                                         "integers (e.g. batch=8,seq=1..512..2048)", part));
    if (flag.dims.count(name) || flag.ranges.count(name)) return InvalidArgument(fmt::format("--shape: '{}' is given twice", name));
    if (bounds.size() == 1) {
      flag.dims[name] = *bounds[0];
      continue;
    }
    const ShapeFlag::Range range{*bounds.front(), bounds.size() == 3 ? *bounds[1] : *bounds.back(), *bounds.back()};
    if (!(range.min <= range.typical && range.typical <= range.max))
      return InvalidArgument(fmt::format("--shape: '{}' is not a range: MIN <= TYPICAL <= MAX", part));
    flag.ranges[name] = range;
  }
  return flag;
}

std::map<std::string, int64_t> ShapeFlag::AtTypical() const {
  std::map<std::string, int64_t> values = dims;
  for (const auto& [name, range] : ranges) values[name] = range.typical;
  return values;
}

Status ShapeFlag::CheckRanges(const Graph& graph) const {
  for (const auto& [name, range] : ranges) {
    auto bound = graph.symbolic_inputs().values.find(name);
    if (bound == graph.symbolic_inputs().values.end())
      return InvalidArgument(fmt::format("--shape: '{}' is not a symbolic dim of the model's inputs", name));
    if (bound->second < range.min || bound->second > range.max)
      return InvalidArgument(fmt::format("--shape: dim '{}' is {} in the inputs given, outside its range {}..{}", name, bound->second,
                                         range.min, range.max));
  }
  return Status::Ok();
}

StatusOr<ImportedModel> LoadModelWithShapes(const std::string& path, const std::string& shape_flag) {
  ImportOptions shapes;
  ASSIGN_OR_RETURN(ShapeFlag flag, ParseShapeFlag(shape_flag));
  shapes.dims = flag.AtTypical();
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
