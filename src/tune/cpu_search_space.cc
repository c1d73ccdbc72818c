#include "tune/cpu_search_space.h"

#include <cmath>
#include <fmt/format.h>

#include "codegen/cpp/cpp_emitter.h"
#include "codegen/kernel_rewrites.h"
#include "codegen/row_cache_plan.h"

namespace tilefuse {

namespace {

constexpr int kTeams[] = {1, 2, 4, 8, 16, 32, 64};
// Outer iterations per chunk: a row kernel's row, a pointwise kernel's element. Below
// 16 a pointwise chunk shares cache lines of its output with its neighbours.
constexpr int kChunks[] = {16, 256, 4096};

}  // namespace

nlohmann::json CppConfigToJson(const CppKernelConfig& c) {
  return {{"threads", c.threads},
          {"schedule", CppScheduleName(c.schedule)},
          {"chunk", c.chunk},
          {"row_buffer", c.row_buffer},
          {"pipeline_rows", c.pipeline_rows}};
}

CppKernelConfig CppConfigFromJson(const nlohmann::json& j) {
  CppKernelConfig c;
  c.threads = j.value("threads", 0);
  if (!ParseCppSchedule(j.value("schedule", "static"), &c.schedule)) c.schedule = CppSchedule::kStatic;
  c.chunk = j.value("chunk", 0);
  c.row_buffer = j.value("row_buffer", true);
  c.pipeline_rows = j.value("pipeline_rows", true);
  return c;
}

double CppConfigRank(const CppKernelConfig& c) {
  double rank = c.threads == 0 ? 0 : 3;  // after every all-core configuration (at most 2.8)
  if (!c.row_buffer) rank += 0.5;
  if (!c.pipeline_rows) rank += 0.25;
  if (c.schedule != CppSchedule::kStatic) rank += (c.schedule == CppSchedule::kDynamic ? 1.5 : 1.0) + 0.1 * std::log2(4096.0 / c.chunk);
  return rank;
}

CppSearchSpace CppCandidates(const Kernel& k, int cores) {
  CppSearchSpace space;
  cores = std::max(1, cores);
  // Whether the emitter would keep a row buffer, decided on the kernel as it emits it (a
  // power is a product there, cheap to recompute).
  const bool has_row_buffer = !k.reductions.empty() && !PlanRowCache(RewriteForEmission(k)).buffer_values.empty();
  // Whether the kernel's passes can be pipelined at all: with the static schedule the
  // emitter picks the block; a chunked one whose chunk it cannot pipeline falls back.
  const bool pipelinable = PipelinedRows(k, {}).block_rows > 0;
  if (!pipelinable) space.pruned.push_back("pipeline_rows false: the kernel is not a pipelined row kernel");
  std::vector<int> teams = {0};
  for (int t : kTeams) {
    if (t >= cores) space.pruned.push_back(fmt::format("threads {}: not fewer than the {} cores (0 uses them all)", t, cores));
    else if (t > k.outer) space.pruned.push_back(fmt::format("threads {}: more than the {} outer iterations", t, k.outer));
    else teams.push_back(t);
  }
  for (bool row_buffer : {true, false}) {
    if (!row_buffer && !has_row_buffer) {
      space.pruned.push_back("row_buffer false: the kernel has no row buffer");
      continue;
    }
    for (bool pipeline : {true, false}) {
      if (!pipeline && !pipelinable) continue;
      for (int threads : teams) {
        int team = threads == 0 ? cores : threads;
        int64_t per_thread = (k.outer + team - 1) / team;
        std::vector<CppKernelConfig> configs = {{threads, CppSchedule::kStatic, 0, row_buffer, pipeline}};
        for (CppSchedule schedule : {CppSchedule::kStaticChunk, CppSchedule::kDynamic})
          for (int chunk : kChunks) {
            std::string what = fmt::format("threads {} {} chunk {}", threads, CppScheduleName(schedule), chunk);
            std::string why = chunk > per_thread ? fmt::format("larger than a thread's {} outer iterations", per_thread)
                              : per_thread % chunk != 0 ? fmt::format("does not divide a thread's {} outer iterations", per_thread)
                                                        : "";
            if (why.empty()) configs.push_back({threads, schedule, chunk, row_buffer, pipeline});
            else if (pipeline) space.pruned.push_back(fmt::format("{}: {}", what, why));
          }
        for (const CppKernelConfig& c : configs) {
          // A chunk the emitter cannot pipeline runs row by row: the same kernel as
          // pipeline_rows false, measured once.
          if (pipeline && pipelinable && PipelinedRows(k, c).block_rows == 0) {
            space.pruned.push_back(fmt::format("threads {} {} chunk {} pipelined: too few rows per chunk to pipeline", c.threads,
                                               CppScheduleName(c.schedule), c.chunk));
            continue;
          }
          space.candidates.push_back(c);
        }
      }
    }
  }
  return space;
}

}  // namespace tilefuse
