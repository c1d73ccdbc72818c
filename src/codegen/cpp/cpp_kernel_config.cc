#include "codegen/cpp/cpp_kernel_config.h"

#include <fmt/format.h>

namespace tilefuse {

const char* CppScheduleName(CppSchedule schedule) {
  switch (schedule) {
    case CppSchedule::kStatic: return "static";
    case CppSchedule::kStaticChunk: return "static_chunk";
    case CppSchedule::kDynamic: return "dynamic";
  }
  return "static";
}

bool ParseCppSchedule(const std::string& name, CppSchedule* schedule) {
  for (CppSchedule s : {CppSchedule::kStatic, CppSchedule::kStaticChunk, CppSchedule::kDynamic})
    if (name == CppScheduleName(s)) {
      *schedule = s;
      return true;
    }
  return false;
}

bool RunsOnCallingThread(double flops, double bytes) { return flops + bytes < kCallingThreadWork; }

std::string CppScheduleClause(const CppKernelConfig& c) {
  switch (c.schedule) {
    case CppSchedule::kStatic: return "schedule(static)";
    case CppSchedule::kStaticChunk: return fmt::format("schedule(static, {})", c.chunk);
    case CppSchedule::kDynamic: return fmt::format("schedule(dynamic, {})", c.chunk);
  }
  return "schedule(static)";
}

std::string CppTeamClause(const CppKernelConfig& c) { return c.threads == 0 ? "" : fmt::format(" num_threads({})", c.threads); }

std::string CppConfigErrorDirective(const CppKernelConfig& c) {
  if (c.threads < 0) return fmt::format("#error \"CppKernelConfig: team of {} threads\"\n", c.threads);
  if (c.schedule != CppSchedule::kStatic && c.chunk <= 0)
    return fmt::format("#error \"CppKernelConfig: {} schedule with chunk {}\"\n", CppScheduleName(c.schedule), c.chunk);
  return "";
}

}  // namespace tilefuse
