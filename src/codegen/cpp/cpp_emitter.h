// The C++ emitter: prints a Kernel as a self-contained C++17 translation unit with one
// `extern "C" void NAME(void* const* buffers)` entry point (buffers in Kernel::buffers
// order). OpenMP splits the outer loop across cores; inner loops are plain loops the
// compiler can vectorise. Half types load and store as 16-bit patterns and compute in
// float; f64 computes in double; integers in int64_t.
#pragma once

#include <string>
#include <vector>

#include "codegen/cpp/cpp_kernel_config.h"
#include "codegen/cpp/cpp_prelude.h"
#include "codegen/kernel.h"

namespace tilefuse {

// The kernel's function alone; a translation unit is CppPrelude() followed by one or
// more of these (a whole graph compiles in one compiler run). `config`: the tuner's
// parameters (codegen/cpp/cpp_kernel_config.h); the default is the untuned kernel. The kernel
// is printed as RewriteForEmission (codegen/kernel_rewrites.h) leaves it.
std::string EmitCppFunction(const Kernel& kernel, const CppKernelConfig& config = {});
// The symbols a C++ loop kernel reads after its buffers: PrintedSymbols, and the row length's
// where it is a size in them (the C++ inner loop takes its length at run time; a CUDA row
// kernel's chunks follow it).
std::vector<int> CppPrintedSymbols(const Kernel& kernel);
// A row kernel's passes pipelined over consecutive rows (see "Pipelined row kernels" in
// cpp_emitter.cc): `block_rows` rows per OpenMP iteration, the state of `slots` rows in
// flight; block_rows 0: the kernel runs one row at a time. Of the kernel as emitted.
struct PipelineShape {
  int64_t block_rows = 0;
  int slots = 1;
};
PipelineShape PipelinedRows(const Kernel& kernel, const CppKernelConfig& config);

// A self-contained translation unit for one kernel: prelude + function.
std::string EmitCpp(const Kernel& kernel, const CppKernelConfig& config = {});

}  // namespace tilefuse
