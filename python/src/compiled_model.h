// CompiledModel: what the Python package holds — a model imported, passed and compiled
// for one backend, as `tilefuse run` does it (tools/run.cc), with the CLI's own pieces
// for loading and checking inputs (tools/cli_common.h) and compiling for the CPU
// (tools/cpu_common.h), so a model behaves the same from Python and from the CLI.
// Free of Python: module.cc converts arrays and errors.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executable.h"
#include "backend/cuda/cuda_executable.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::python {

struct ModelCompileOptions {
  std::string backend = "auto";  // auto, cuda, cpu or reference (as `tilefuse run --backend`)
  bool tune = false;             // tune the kernels first (cached), as `--tune`
  bool fuse = true;              // false: every op its own kernel, as `--no-fusion`
};

// One compiled kernel as `tilefuse run --json` lists it.
struct KernelSummary {
  std::string name;
  std::string kind;     // the fusion group's kind: pointwise, row_reduction, gemm, ...
  bool generated = false;
  std::string why_not;  // why it runs on the reference kernels (or the host, on the GPU)
  std::string mode;     // cuda: generated, gemm template, attention template, gemm, host
  int num_nodes = 0;
};

// A graph input or output as the compiled graph sees it.
struct ValueType {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

class CompiledModel {
 public:
  // Imports `path` (.onnx, .onnxtxt or a backend-test folder), runs the graph passes and
  // compiles for `options.backend`. "auto" is cuda when a GPU is usable, else cpu, else the
  // reference interpreter; why it fell back is in backend_note().
  static StatusOr<std::unique_ptr<CompiledModel>> Compile(const std::string& path, const ModelCompileOptions& options);

  // Inputs in graph order, checked like `tilefuse run --inputs` checks a folder's (the
  // message names `source`). One run at a time: concurrent callers wait.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, const std::string& source);

  // One run on device memory the caller owns, queued on the caller's CUDA stream
  // (CudaExecutable::RunOnDevice); only where device_runs().
  Status RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream);
  // Whether RunOnDevice works: the model runs on the GPU as one captured CUDA graph.
  bool device_runs() const { return gpu_ && gpu_->captured(); }

  // `tilefuse explain --json [--no-fusion] --device DEVICE` of the same model.
  StatusOr<std::string> ExplainJson(const std::string& device) const;

  const std::string& backend() const { return backend_; }  // cuda, cpu or reference
  const std::string& backend_note() const { return backend_note_; }
  const std::vector<KernelSummary>& kernels() const { return kernels_; }
  const std::vector<ValueType>& inputs() const { return inputs_; }
  const std::vector<ValueType>& outputs() const { return outputs_; }
  double compile_ms() const { return compile_ms_; }

 private:
  Status PrepareBackend(const ModelCompileOptions& options);
  void DescribeKernels();

  Graph passed_;
  bool fuse_ = true;
  bool auto_backend_ = false;
  std::string backend_, backend_note_;
  std::unique_ptr<CudaExecutable> gpu_;
  std::unique_ptr<CpuExecutable> cpu_;
  std::vector<KernelSummary> kernels_;
  std::vector<ValueType> inputs_, outputs_;
  double compile_ms_ = 0;
  std::mutex run_mutex_;
};

}  // namespace tilefuse::python
