#include "codegen/cuda/cuda_launch_together.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tilefuse {

namespace {

constexpr std::string_view kSignature = "extern \"C\" __global__ void __launch_bounds__(";

// A kernel's function as the loop emitter writes it: launch bounds, name, parameters, body
// (after the prior grid's wait).
struct KernelText {
  std::string bounds, name, body;
  std::vector<std::string> parameters, parameter_names;
};

StatusOr<KernelText> ParseKernel(const CudaKernelSource& s) {
  const std::string& f = s.function;
  if (f.rfind(kSignature, 0) != 0) return InvalidArgument(fmt::format("{}: not the loop emitter's signature first", s.name));
  KernelText k;
  const size_t bounds_end = f.find(") ", kSignature.size());
  const size_t open = f.find('(', bounds_end);
  const size_t close = f.find(") {\n", open);
  if (bounds_end == std::string::npos || open == std::string::npos || close == std::string::npos)
    return InvalidArgument(fmt::format("{}: a signature not understood", s.name));
  k.bounds = f.substr(kSignature.size(), bounds_end - kSignature.size());
  k.name = f.substr(bounds_end + 2, open - bounds_end - 2);
  if (k.name != s.name) return InvalidArgument(fmt::format("{}: the function is named {}", s.name, k.name));
  const std::string list = f.substr(open + 1, close - open - 1);
  for (size_t start = 0; start < list.size();) {
    size_t end = list.find(", ", start);
    if (end == std::string::npos) end = list.size();
    const std::string parameter = list.substr(start, end - start);
    // Pointers and scalars; no template arguments or arrays, whose commas or brackets this
    // does not read.
    if (parameter.find_first_of("<>()[],") != std::string::npos)
      return InvalidArgument(fmt::format("{}: parameter '{}' not understood", s.name, parameter));
    const size_t space = parameter.find_last_of(" *");
    if (space == std::string::npos) return InvalidArgument(fmt::format("{}: parameter '{}' without a name", s.name, parameter));
    k.parameters.push_back(parameter);
    k.parameter_names.push_back(parameter.substr(space + 1));
    start = end + 2;
  }
  const size_t body = close + 4;
  if (f.compare(body, std::char_traits<char>::length(kAwaitPriorGrid), kAwaitPriorGrid) != 0)
    return InvalidArgument(fmt::format("{}: the prior grid not awaited first", s.name));
  k.body = f.substr(body + std::char_traits<char>::length(kAwaitPriorGrid));
  for (const char* unread : {"blockIdx.y", "blockIdx.z", "gridDim.y", "gridDim.z", "extern __shared__", "cluster", "__global__"})
    if (k.body.find(unread) != std::string::npos) return InvalidArgument(fmt::format("{}: its body uses {}", s.name, unread));
  return k;
}

std::string ReplaceAll(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  return text;
}

// The launch's side of CanLaunchTogether (the function's text is ParseKernel's).
Status CheckLaunch(const CudaKernelSource& s) {
  const LaunchSpec& l = s.launch;
  if (l.grid[1] != 1 || l.grid[2] != 1 || l.block[1] != 1 || l.block[2] != 1) return InvalidArgument(fmt::format("{}: not 1-D", s.name));
  if (l.cluster != std::array<int, 3>{1, 1, 1} || l.persistent_clusters) return InvalidArgument(fmt::format("{}: clusters", s.name));
  if (l.dynamic_shared_bytes != 0 || l.scratch_bytes != 0 || !s.includes.empty())
    return InvalidArgument(fmt::format("{}: dynamic shared memory, scratch memory or a skeleton", s.name));
  if (!l.awaits_prior_grid) return InvalidArgument(fmt::format("{}: the prior grid not awaited", s.name));
  for (const LaunchArg& a : l.args)
    if (a.kind != LaunchArg::Kind::kBuffer) return InvalidArgument(fmt::format("{}: arguments besides buffers", s.name));
  return Status::Ok();
}

}  // namespace

Status CanLaunchTogether(const CudaKernelSource& s) {
  RETURN_IF_ERROR(CheckLaunch(s));
  return ParseKernel(s).status();
}

StatusOr<CudaKernelSource> LaunchTogether(const std::string& name, const std::vector<CudaKernelSource>& parts) {
  if (parts.size() < 2) return InvalidArgument(fmt::format("{}: {} kernels to launch together", name, parts.size()));
  std::vector<KernelText> texts;
  for (const CudaKernelSource& p : parts) {
    RETURN_IF_ERROR(CheckLaunch(p));
    ASSIGN_OR_RETURN(KernelText k, ParseKernel(p));
    if (p.launch.block != parts.front().launch.block || (!texts.empty() && k.bounds != texts.front().bounds))
      return InvalidArgument(fmt::format("{}: {} and {} run blocks of different sizes", name, parts.front().name, p.name));
    texts.push_back(std::move(k));
  }
  CudaKernelSource s;
  s.name = name;
  s.threads = parts.front().threads;
  s.config = parts.front().config;
  std::string functions, parameters, dispatch;
  std::vector<std::string> strategies;
  int64_t first_block = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const KernelText& k = texts[p];
    // The part as a device function of its own block and grid (the names stay unique: each
    // part is a kernel of the same program).
    const std::string part = fmt::format("{}_part{}", name, p);
    std::string body = ReplaceAll(ReplaceAll(k.body, "blockIdx.x", "tf_block_x"), "gridDim.x", "tf_grid_x");
    functions += fmt::format("__device__ __forceinline__ void {}({}{}const unsigned tf_block_x, const unsigned tf_grid_x) {{\n{}", part,
                             fmt::join(k.parameters, ", "), k.parameters.empty() ? "" : ", ", body);
    std::vector<std::string> arguments;
    for (size_t i = 0; i < k.parameters.size(); ++i) {
      const std::string& type_and_name = k.parameters[i];
      const std::string renamed = fmt::format("p{}_{}", p, k.parameter_names[i]);
      parameters += (parameters.empty() ? "" : ", ") + type_and_name.substr(0, type_and_name.size() - k.parameter_names[i].size()) + renamed;
      arguments.push_back(renamed);
    }
    const int64_t blocks = parts[p].launch.grid[0];
    dispatch += fmt::format("  if (block < {}u) {{\n    {}({}{}block - {}u, {}u);\n    return;\n  }}\n", first_block + blocks, part,
                            fmt::join(arguments, ", "), arguments.empty() ? "" : ", ", first_block, blocks);
    first_block += blocks;
    strategies.push_back(parts[p].strategy);
    s.launch.args.insert(s.launch.args.end(), parts[p].launch.args.begin(), parts[p].launch.args.end());
  }
  s.function = functions + fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}  const unsigned block = blockIdx.x;\n{}}}\n",
                                       texts.front().bounds, name, parameters, kAwaitPriorGrid, dispatch);
  s.num_params = static_cast<int>(s.launch.args.size());
  s.work_blocks = first_block;
  s.strategy = fmt::format("{} kernels launched together ({})", parts.size(), fmt::join(strategies, "; "));
  s.launch.grid = {first_block, 1, 1};
  s.launch.block = parts.front().launch.block;
  s.launch.awaits_prior_grid = true;
  return s;
}

}  // namespace tilefuse
