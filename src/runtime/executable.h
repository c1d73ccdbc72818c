// Executable: a graph compiled for one backend and loaded, ready to run. What the driver
// (driver/driver.h) returns and what the measurement harness (runtime/measure.h) times;
// each backend's executable (CpuExecutable, CudaExecutable) adds what only it can do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// One step of a run: a plan group's kernels (or library calls, or reference steps).
struct KernelTiming {
  std::string name;
  double start_us = 0, duration_us = 0;
};

class Executable {
 public:
  virtual ~Executable() = default;

  virtual std::string_view backend() const = 0;  // "cpu", "cuda"
  virtual const Graph& graph() const = 0;
  virtual const FusionPlan& plan() const = 0;
  // Inputs in graph.inputs() order (dtype and shape checked), one host tensor per output.
  // With `timings`, one entry per plan group, in plan order, each timed on its own (the
  // backend's clock: steady clock on the CPU, device events on the GPU).
  virtual StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings = nullptr) = 0;
  // Milliseconds of one whole run, `repeats` times after `warmup`, the median; inputs
  // rotated among `input_sets` copies so that repeats do not find them in cache.
  virtual StatusOr<double> BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) = 0;
  virtual int64_t arena_bytes() const = 0;  // intermediate memory, from the liveness plan
  // Waits for kernels still compiling in the background (the CUDA backend's
  // background_compile), and runs them from then on; Ok at once where none are.
  virtual Status FinishCompiles() { return Status::Ok(); }

  // Wall time of the driver's stages, plan to load (set by the driver), in all and each:
  // "plan", "lower", "build" (the host compiler or NVRTC, caches included), "load".
  double compile_ms() const { return compile_ms_; }
  void set_compile_ms(double ms) { compile_ms_ = ms; }
  const std::vector<std::pair<std::string, double>>& compile_stages_ms() const { return compile_stages_ms_; }
  void set_compile_stages_ms(std::vector<std::pair<std::string, double>> stages) { compile_stages_ms_ = std::move(stages); }

 private:
  double compile_ms_ = 0;
  std::vector<std::pair<std::string, double>> compile_stages_ms_;
};

}  // namespace tilefuse
