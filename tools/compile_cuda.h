// `tilefuse compile MODEL --backend cuda [--arch sm_90a] [--emit DIR]`: generates the CUDA
// kernels of a model and compiles them with NVRTC for `arch` — no GPU needed — then
// reports per kernel its template and ptxas's resource line (registers, spills).
#pragma once

#include <string>

#include "cuda_path_options.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse::cli {

struct CudaCompileRequest {
  std::string model;
  std::string arch = "sm_90a";
  std::string emit_dir;
  std::string dump_dir;  // the driver's stage dumps (the staging folder)
  bool fuse = true;
  bool json = false;
  CudaPathChoices paths;  // how gemm and attention groups and f32 matmuls run
};

// Exit status: an error for bad input or a compiler failure; spills are reported, not errors.
Status CompileForCudaCommand(const CudaCompileRequest& request, const Graph& passed);

}  // namespace tilefuse::cli
