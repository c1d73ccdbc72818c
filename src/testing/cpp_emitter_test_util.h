// Test helper for the C++ emitter's tests: an ONNX text model through the graph passes,
// compiled for the CPU with poisoned outputs (a shared test kernel cache).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "codegen/kernel_fingerprint.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"

namespace tilefuse::emitter_test {

struct CompiledModel {
  Graph graph;
  std::unique_ptr<CpuExecutable> compiled;
};

// `config`, when given, applies to every kernel of the graph.
inline CompiledModel CompileModelText(const std::string& text, const CppKernelConfig* config = nullptr) {
  auto model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  if (config) {
    auto plain = CompileForCpu(*graph, options);
    EXPECT_TRUE(plain.ok());
    for (const KernelInfo& k : (*plain)->kernels())
      if (const Kernel* loop = (*plain)->LoopKernel(k.name)) options.configs[KernelFingerprint(*loop)] = *config;
  }
  auto compiled = CompileForCpu(*graph, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return {std::move(*graph), std::move(*compiled)};
}

}  // namespace tilefuse::emitter_test
