// Backend: what the compiler driver (driver/driver.h) asks of a target, stage by stage.
//
//   Plan    the planner with the target's device spec and capabilities; a target may
//           re-plan what its templates refuse (the CUDA backend splits attention it cannot
//           run whole)
//   Lower   every group of the plan to kernels (loop Kernel IR, templates) and their source
//   Build   one compiler run over the sources of one or more lowered graphs
//   Load    one Executable per lowered graph: memory, linked kernels, constants in place
//
// The driver owns the order, the verifiers and the dumps between stages; a backend owns
// what happens inside each stage. Backends: backend/cpu/cpu_backend.h,
// backend/cuda/cuda_backend.h.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel.h"
#include "fusion/fusion_plan.h"
#include "fusion/planner.h"
#include "fusion/target_capabilities.h"
#include "runtime/executable.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// A plan and what the backend's planning noted (attention candidates split, and why).
struct PlannedGraph {
  FusionPlan plan;
  std::vector<std::string> notes;
};

// One graph's kernels, lowered and emitted, not yet compiled.
class LoweredGraph {
 public:
  virtual ~LoweredGraph() = default;
  virtual const FusionPlan& plan() const = 0;
  // Every loop kernel's IR (a template's: its epilogue or score program), in launch order;
  // the driver verifies the loop kernels (VerifyKernel) and dumps them all.
  struct LoweredKernel {
    const Kernel* kernel;
    bool is_template;
  };
  virtual std::vector<LoweredKernel> Kernels() const = 0;
  virtual std::string SourceText() const = 0;    // this graph's generated source
};

// What one compiler run made (a shared object, a cubin), for Load.
class ObjectCode {
 public:
  virtual ~ObjectCode() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The file name the driver dumps the generated source under ("kernels.cpp", "kernels.cu").
  virtual std::string_view source_file_name() const = 0;
  // What the target's kernels fuse, as FusionDecisions the planner asks (the driver hands
  // them to the planner, so a group costs what will really run).
  virtual const TargetCapabilities& capabilities() const = 0;
  // `options` carry the user's choices and the capabilities; the backend sets its device spec.
  virtual StatusOr<PlannedGraph> Plan(const Graph& graph, PlannerOptions options) = 0;
  // `prefix` keeps kernel names of several graphs in one translation unit apart.
  virtual StatusOr<std::unique_ptr<LoweredGraph>> Lower(const Graph& graph, PlannedGraph planned, const std::string& prefix) = 0;
  virtual StatusOr<std::unique_ptr<ObjectCode>> Build(const std::vector<const LoweredGraph*>& graphs) = 0;
  virtual StatusOr<std::unique_ptr<Executable>> Load(std::unique_ptr<LoweredGraph> graph, const ObjectCode& code) = 0;
};

}  // namespace tilefuse
