// The tunable parameters of a generated C++ kernel (codegen/cpp/cpp_emitter.h). The
// defaults are the untuned kernel.
//
//   #pragma omp parallel for [simd] schedule(static) num_threads(4)   ← threads, schedule, chunk
//   row kernels: row buffer (codegen/row_cache_plan.h) or recompute   ← row_buffer
//   row kernels: passes of consecutive rows pipelined, or row by row   ← pipeline_rows
#pragma once

#include <string>

namespace tilefuse {

enum class CppSchedule { kStatic, kStaticChunk, kDynamic };

struct CppKernelConfig {
  int threads = 0;                              // OpenMP team size; 0: every core (the OpenMP default)
  CppSchedule schedule = CppSchedule::kStatic;  // of the outer loop
  int chunk = 0;                                // outer iterations per chunk (kStaticChunk, kDynamic)
  bool row_buffer = true;  // row kernels with a row buffer: use it; false: recompute in every pass
  // Row kernels: run the passes of consecutive rows in one inner loop (see the emitter's
  // "Pipelined row kernels"); with a chunked schedule, the chunk is the pipelined block.
  bool pipeline_rows = true;
  bool operator==(const CppKernelConfig&) const = default;
};

// "static", "static_chunk", "dynamic"; false for an unknown name.
const char* CppScheduleName(CppSchedule schedule);
bool ParseCppSchedule(const std::string& name, CppSchedule* schedule);

// Small kernels run on the calling thread. Waking an OpenMP team costs a few microseconds
// on a quiet machine; on a busy one (another process on a core) the region's closing
// barrier waits for a worker the scheduler has not run yet, whole scheduler ticks (the
// GELU example: 0.009 ms quiet, 7-8 ms beside one busy process). Below the threshold the
// team's gain is smaller than that risk. `work` = flops + bytes moved (the cost model's
// two counts added); the threshold and how it was chosen:
// bench/results/2026-11-29-cpu-under-load.md.
inline constexpr double kCallingThreadWork = 1 << 18;
bool RunsOnCallingThread(double flops, double bytes);

// The clauses the emitter prints: "schedule(static)", "schedule(dynamic, 16)"; "" or
// " num_threads(4)".
std::string CppScheduleClause(const CppKernelConfig& config);
std::string CppTeamClause(const CppKernelConfig& config);
// "" for a configuration the template can run, else an `#error` line naming what is
// wrong: the emitter returns no Status, so such a kernel fails to compile, loudly (the
// compiler only warns about a non-positive chunk or team and then ignores it).
std::string CppConfigErrorDirective(const CppKernelConfig& config);

}  // namespace tilefuse
