// Memory planning by liveness: the intermediates of a schedule of kernels share one
// arena, and two of them share bytes only when their live ranges are disjoint.
//
// A buffer is live from the first step that writes it to the last step that touches it,
// both inclusive, so a kernel's inputs and outputs never alias (kernels are not
// written to run in place). Graph inputs, graph outputs and constants belong to the
// caller or the graph and are not planned.
//
// Placement is the greedy-by-size heuristic of the TFLite and ONNX Runtime arena
// planners: largest buffer first, each put in the smallest gap that fits between the
// already placed buffers whose lifetimes overlap its own (best fit), else above them.
// Deterministic: ties break on the earlier first use, then the smaller buffer index.
// The plan reports the arena size next to the peak of live bytes (the lower bound no
// placement can beat) so a report can show how close it came.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

enum class BufferRole : uint8_t { kGraphInput, kGraphOutput, kConstant, kIntermediate };

std::string_view BufferRoleName(BufferRole role);

struct ScheduledBuffer {
  int64_t bytes = 0;
  BufferRole role = BufferRole::kIntermediate;
  int node = -1;     // the graph node it holds, when built from a graph
  std::string name;  // for messages
};

// One kernel. `reads` and `writes` are indices into Schedule::buffers.
struct ScheduleStep {
  std::string name;
  std::vector<int> reads;
  std::vector<int> writes;
};

struct Schedule {
  std::vector<ScheduledBuffer> buffers;
  std::vector<ScheduleStep> steps;  // in execution order
};

// Inclusive step interval; {-1, -1} for buffers outside the arena.
struct LiveRange {
  int first = -1;
  int last = -1;
  bool Overlaps(const LiveRange& other) const { return first <= other.last && other.first <= last; }
};

struct MemoryPlanOptions {
  int64_t alignment = 64;  // bytes, a power of two (the CUDA backend wants 256)
};

struct MemoryPlan {
  int64_t alignment = 64;
  std::vector<int64_t> offsets;          // per buffer; -1 for buffers outside the arena
  std::vector<LiveRange> live_ranges;    // per buffer
  int64_t arena_bytes = 0;               // the arena this plan needs
  int64_t peak_live_bytes = 0;           // max over steps of the live intermediates' bytes
  int peak_step = -1;                    // a step where that peak is reached
  int64_t total_intermediate_bytes = 0;  // every intermediate in its own allocation
  int num_intermediates = 0;
};

// InvalidArgument for a malformed schedule: an index out of range, a negative size, an
// intermediate read before any step writes it, or a graph input / constant written.
StatusOr<MemoryPlan> PlanMemory(const Schedule& schedule, const MemoryPlanOptions& options = {});

// Verifies a plan against its schedule: every intermediate is aligned and inside the
// arena, nothing else is in it, and no two intermediates whose live ranges overlap
// overlap in memory. The error names the first pair that does.
Status CheckMemoryPlan(const Schedule& schedule, const MemoryPlan& plan);

// One step per fusion group, in the plan's order; a buffer per node that a group writes
// or reads, except iotas and inlined generators (recomputed by every reader, never
// stored). Parameters are graph inputs, Constant nodes constants; a group output that
// is also a graph output is a graph output, any other an intermediate. Buffers follow
// node id order.
Schedule ScheduleFromFusionPlan(const Graph& graph, const FusionPlan& plan);

// Values a step materialises for itself, that no other step reads (on the CPU, the
// prologue outputs and the product inside a gemm group). `local_values[s]` lists step
// s's; each without a buffer yet gets one that step s alone writes, so it is live during
// that step only and shares bytes with what the other steps use. Nodes that have a
// buffer keep it.
void AddStepLocalBuffers(const Graph& graph, const std::vector<std::vector<int>>& local_values, Schedule& schedule);

// Values a step's kernels read beyond its group's inputs (a template reading an operand
// through a view reads the view's source, a backend's kernel another group's output): each
// that has a buffer is read by step s too, so no later value takes its bytes before then.
// `touched[s]` lists step s's; values without a buffer, and those the step writes, are left.
void AddStepReads(const std::vector<std::vector<int>>& touched, Schedule& schedule);

// ScheduleFromFusionPlan + PlanMemory: how much intermediate memory running `plan`
// needs. Plan the fused and the unfused (PlannerOptions::fuse = false) plans of a graph
// to compare the two.
StatusOr<MemoryPlan> PlanFusionPlanMemory(const Graph& graph, const FusionPlan& plan,
                                          const MemoryPlanOptions& options = {});

// "12 intermediates, arena 4.0 MiB (peak live 3.5 MiB, no reuse 9.0 MiB)"
std::string DescribeMemoryPlan(const MemoryPlan& plan);

}  // namespace tilefuse
