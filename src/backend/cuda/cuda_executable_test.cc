// The GPU runtime's run on caller-owned device memory (needs a GPU; skipped without one, and
// run by scripts/gpu-check.sh's `tests` stage).
#include "backend/cuda/cuda_executable.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable_state.h"
#include "driver/driver.h"
#include "tilefuse/builder.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "testing/random_inputs.h"

namespace tilefuse {
namespace {

class GpuRunOnDeviceTest : public testing::Test {
 protected:
  void SetUp() override {
    auto device = CudaDevice::Get();
    if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; device-memory runs not tested";
    device_ = *device;
    ASSERT_TRUE(device_->MakeCurrent().ok());
  }
  StatusOr<std::unique_ptr<CudaExecutable>> CompileExample(const std::string& name) {
    ASSIGN_OR_RETURN(ImportedModel model, ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name));
    ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(model.graph), PassOptions{}));
    return CompileForCuda(graph, CudaCompileOptions{});
  }
  // A device copy of `t`, `offset` bytes past the start of its allocation.
  CUdeviceptr Upload(const Tensor& t, int offset = 0) {
    CUdeviceptr p = 0;
    EXPECT_EQ(device_->api().cuMemAlloc(&p, t.num_bytes() + offset), CUDA_SUCCESS);
    allocated_.push_back(p);
    EXPECT_EQ(device_->api().cuMemcpyHtoD(p + offset, t.data(), t.num_bytes()), CUDA_SUCCESS);
    return p + offset;
  }
  void TearDown() override {
    for (CUdeviceptr p : allocated_) device_->api().cuMemFree(p);
  }
  // One RunOnDevice of `compiled` on `stream` into outputs poisoned before: every output the
  // same bits as `expected`.
  void RunPoisonedAndCompare(CudaExecutable& compiled, const std::vector<uint64_t>& input_ptrs,
                             const std::vector<uint64_t>& output_ptrs, const std::vector<Tensor>& expected, CUstream stream) {
    for (size_t o = 0; o < expected.size(); ++o)
      ASSERT_EQ(device_->api().cuMemsetD8Async(output_ptrs[o], 0xFF, expected[o].num_bytes(), stream), CUDA_SUCCESS);
    Status ran = compiled.RunOnDevice(input_ptrs, output_ptrs, reinterpret_cast<uint64_t>(stream));
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    ASSERT_EQ(device_->api().cuStreamSynchronize(stream), CUDA_SUCCESS);
    for (size_t o = 0; o < expected.size(); ++o) {
      Tensor got(expected[o].dtype(), expected[o].shape());
      ASSERT_EQ(device_->api().cuMemcpyDtoH(got.data(), output_ptrs[o], got.num_bytes()), CUDA_SUCCESS);
      EXPECT_EQ(std::memcmp(got.data(), expected[o].data(), got.num_bytes()), 0) << "output " << o;
    }
  }
  CudaDevice* device_ = nullptr;
  std::vector<CUdeviceptr> allocated_;
};

// On a stream of the caller's, into the caller's buffers: the same bits as the host-tensor run
// (the same kernels), every output element written (the buffers hold poison before). Three
// ways: in place on new pointers (launched kernel by kernel on them), on the same pointers
// again (a graph captured on them), a third time (that graph replayed), and on pointers 64
// bytes past an aligned address (copied through the graph's own buffers).
TEST_F(GpuRunOnDeviceTest, MatchesTheHostRunBitForBitOnTheCallersStream) {
  for (const char* example : {"layernorm_manual.onnxtxt", "mlp_block.onnxtxt"}) {
    SCOPED_TRACE(example);
    auto compiled = CompileExample(example);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    ASSERT_TRUE((*compiled)->captured());
    const Graph& g = (*compiled)->graph();
    const std::vector<Tensor> inputs = RandomInputs(g, 11);
    auto expected = (*compiled)->Run(inputs);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    CUstream stream = nullptr;
    ASSERT_EQ(device_->api().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (int offset : {0, 64}) {
      std::vector<uint64_t> input_ptrs, output_ptrs;
      for (const Tensor& t : inputs) input_ptrs.push_back(Upload(t, offset));
      for (const Tensor& e : *expected) output_ptrs.push_back(Upload(Tensor(e.dtype(), e.shape()), offset));
      for (int call = 0; call < (offset ? 1 : 3); ++call) {
        SCOPED_TRACE(fmt::format("offset {}, call {}", offset, call));
        RunPoisonedAndCompare(**compiled, input_ptrs, output_ptrs, *expected, stream);
        if (HasFatalFailure()) break;
      }
    }
    device_->api().cuStreamDestroy(stream);
  }
}

// Outputs no kernel writes in place: an input returned as it is, the same node returned twice,
// and a constant. A training forward returns some of its inputs as saved tensors; such a graph
// ran wholly through the copies before (GPT-2's step: 971 copies). Now its kernels run in place
// and only these outputs are copied, on new pointers (kernel by kernel), again (captured) and a
// third time (replayed).
TEST_F(GpuRunOnDeviceTest, OutputsThatAreInputsRepeatsOrConstantsAreCopiedTheRestRunsInPlace) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {64, 256});
  Value y = b.Unary(OpCode::kExp, x);
  b.Output(y, "y");
  b.Output(x, "x_again");
  b.Output(y, "y_again");
  b.Output(b.Constant(Tensor::Random(DType::kF32, {256}, 5)), "c");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto compiled = CompileForCuda(*graph, CudaCompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_EQ((*compiled)->state()->caller_copies.size(), 3u) << "the input returned, the repeat and the constant";
  const std::vector<Tensor> inputs = {Tensor::Random(DType::kF32, {64, 256}, 7)};
  auto expected = (*compiled)->Run(inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  CUstream stream = nullptr;
  ASSERT_EQ(device_->api().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  std::vector<uint64_t> input_ptrs = {Upload(inputs[0])}, output_ptrs;
  for (const Tensor& e : *expected) output_ptrs.push_back(Upload(Tensor(e.dtype(), e.shape())));
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE(fmt::format("call {}", call));
    RunPoisonedAndCompare(**compiled, input_ptrs, output_ptrs, *expected, stream);
    if (HasFatalFailure()) break;
  }
  device_->api().cuStreamDestroy(stream);
}

// A decode step's calls: a small input and the output at new pointers every call, a weight
// where it was. From the third call the two are staged (copied through the graph's own buffers
// so the captured graph replays) and from the fourth the runtime repeats the third's decisions
// with the new pointers (State::RepeatStagedRun); every call's output as the host run's, in
// the buffer it was given, the buffers given before left as they were. Then an output given
// the input's own pointer: a call RepeatStagedRun must leave to the full path (the input
// diverted or staged anew), with the same result.
TEST_F(GpuRunOnDeviceTest, StagedPointersNewEveryCallRepeatTheRunsDecisions) {
  GraphBuilder b;
  Value token = b.Parameter("token", DType::kF32, {64});
  Value weight = b.Parameter("weight", DType::kF32, {64});
  b.Output(b.AddScalar(b.Mul(token, weight), 1.0), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto compiled = CompileForCuda(*graph, CudaCompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  CUstream stream = nullptr;
  ASSERT_EQ(device_->api().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const Tensor weight_values = Tensor::Random(DType::kF32, {64}, 3);
  const uint64_t weight_ptr = Upload(weight_values);
  std::vector<std::pair<uint64_t, std::vector<Tensor>>> earlier;  // each call's output pointer and expected value
  for (int call = 0; call < 8; ++call) {
    SCOPED_TRACE(fmt::format("call {}", call));
    const Tensor token_values = Tensor::Random(DType::kF32, {64}, 100 + call);
    auto expected = (*compiled)->Run({token_values, weight_values});
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    const uint64_t output_ptr = Upload(Tensor(DType::kF32, {64}));
    RunPoisonedAndCompare(**compiled, {Upload(token_values), weight_ptr}, {output_ptr}, *expected, stream);
    if (HasFatalFailure()) break;
    earlier.emplace_back(output_ptr, std::move(*expected));
  }
  const CudaExecutable::RunCounts counts = (*compiled)->device_run_counts();
  EXPECT_GE(counts.staged_copies, 2 * 5) << "the token in and the output out, from the third call on";
  EXPECT_GE(counts.replays, 5);
  for (size_t i = 0; i < earlier.size(); ++i) {  // an earlier call's output is not written again
    Tensor got(DType::kF32, {64});
    ASSERT_EQ(device_->api().cuMemcpyDtoH(got.data(), earlier[i].first, got.num_bytes()), CUDA_SUCCESS);
    EXPECT_EQ(std::memcmp(got.data(), earlier[i].second[0].data(), got.num_bytes()), 0) << "call " << i << "'s output";
  }
  // The output written over the token it is computed from.
  const Tensor token_values = Tensor::Random(DType::kF32, {64}, 999);
  auto expected = (*compiled)->Run({token_values, weight_values});
  ASSERT_TRUE(expected.ok());
  const uint64_t shared = Upload(token_values);
  Status ran = (*compiled)->RunOnDevice({shared, weight_ptr}, {shared}, reinterpret_cast<uint64_t>(stream));
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_EQ(device_->api().cuStreamSynchronize(stream), CUDA_SUCCESS);
  Tensor got(DType::kF32, {64});
  ASSERT_EQ(device_->api().cuMemcpyDtoH(got.data(), shared, got.num_bytes()), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(got.data(), (*expected)[0].data(), got.num_bytes()), 0) << "the output over its input";
  device_->api().cuStreamDestroy(stream);
}

// Identical kernels share a compile unit (backend/cuda/cuda_compile_units.h): three softmax
// layers of one shape run one function from one module (the products between them: cuBLASLt).
TEST_F(GpuRunOnDeviceTest, KernelsSharingAUnitRunFromItsModule) {
  auto model = ImportOnnxText(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
layers (float[64,128] x, float[128,128] w) => (float[64,128] y)
{
  s1 = Softmax <axis = -1> (x)
  m1 = MatMul (s1, w)
  s2 = Softmax <axis = -1> (m1)
  m2 = MatMul (s2, w)
  y = Softmax <axis = -1> (m2)
}
)ONNX");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto compiled = CompileForCuda(*graph, CudaCompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  int generated = 0;
  for (const CudaGroupProgram& p : (*compiled)->program().groups) generated += static_cast<int>(Launchables(p).size());
  EXPECT_LT((*compiled)->nvrtc_compiles() + (*compiled)->nvrtc_cache_hits(), generated) << "the softmax layers share a unit";
  std::vector<Tensor> inputs = {Tensor::Random(DType::kF32, {64, 128}, 3), Tensor::Random(DType::kF32, {128, 128}, 4)};
  auto got = (*compiled)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto expected = RunReference(*graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  Comparison c = CompareTensors((*got)[0], (*expected)[0]);
  EXPECT_TRUE(c.pass) << c.reason;
}

TEST_F(GpuRunOnDeviceTest, WrongNumberOfPointersIsAnError) {
  auto compiled = CompileExample("layernorm_manual.onnxtxt");
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  Status ran = (*compiled)->RunOnDevice({}, {}, 0);
  EXPECT_EQ(ran.code(), StatusCode::kInvalidArgument) << ran.ToString();
  EXPECT_NE(ran.message().find("device pointers"), std::string::npos) << ran.ToString();
}

// The benchmark times the captured graph, or with TILEFUSE_BENCH_DIRECT=1 the kernels launched
// one by one (a diagnosis: PyTorch's peers launch directly); both time the same work, queued.
TEST_F(GpuRunOnDeviceTest, BenchmarkTimesTheGraphOrTheKernelsLaunchedDirectly) {
  for (const char* example : {"layernorm_manual.onnxtxt", "mlp_block.onnxtxt"}) {
    SCOPED_TRACE(example);
    auto compiled = CompileExample(example);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    const Graph& g = (*compiled)->graph();
    const std::vector<Tensor> inputs = RandomInputs(g, 31);
    auto graph_ms = (*compiled)->BenchmarkMs(inputs, 3, 50, 2);
    ::setenv("TILEFUSE_BENCH_DIRECT", "1", 1);
    auto direct_ms = (*compiled)->BenchmarkMs(inputs, 3, 50, 2);
    ::unsetenv("TILEFUSE_BENCH_DIRECT");
    ASSERT_TRUE(graph_ms.ok()) << graph_ms.status().ToString();
    ASSERT_TRUE(direct_ms.ok()) << direct_ms.status().ToString();
    EXPECT_GT(*graph_ms, 0.0);
    EXPECT_GT(*direct_ms, 0.0);
    // The same kernels: within a factor of 4 either way (launch gaps aside).
    EXPECT_LT(*direct_ms, 4 * *graph_ms);
    EXPECT_LT(*graph_ms, 4 * *direct_ms);
  }
}

// CudaCompileOptions::background_compile with an empty kernel cache: a GEMM whose rule is the
// overlapped epilogue runs its ping-pong stand-in first, then its own form once the background
// compile ends (FinishCompiles), captured again; both write every element (poisoned outputs)
// and agree with the f64 reference, on host tensors and on the caller's device memory.
TEST_F(GpuRunOnDeviceTest, AKernelCompiledInTheBackgroundIsSwappedInForItsStandIn) {
  auto model = ImportOnnxText(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[4096] b) => (bfloat16[2048,4096] y)
{
  p = MatMul (x, w)
  s = Add (p, b)
  y = Relu (s)
}
)ONNX");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  std::random_device seed;
  const std::filesystem::path cache = std::filesystem::temp_directory_path() / fmt::format("tilefuse_background_{:x}", seed());
  CudaCompileOptions options;
  options.cache_dir = cache.string();
  options.background_compile = true;
  options.poison_outputs = true;
  auto compiled = CompileForCuda(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  CudaExecutable& e = **compiled;
  const std::vector<Tensor> inputs = RandomInputs(*graph, 5);
  auto gemm_strategy = [&] {
    for (const CudaKernelInfo& k : e.kernels())
      if (k.mode == "gemm template") return k.strategy;
    return std::string("no gemm template kernel");
  };
  ASSERT_EQ(e.pending_compiles(), 1) << "an empty cache: the overlapped form compiles in the background";
  EXPECT_NE(gemm_strategy().find("ping-pong"), std::string::npos) << gemm_strategy();
  // Run at once (the own form takes seconds to compile), then checked.
  auto stand_in = e.Run(inputs);
  ASSERT_TRUE(stand_in.ok()) << stand_in.status().ToString();
  EXPECT_EQ(e.kernel_swaps(), 0) << "the stand-in ran";
  ASSERT_TRUE(e.FinishCompiles().ok());
  EXPECT_EQ(e.pending_compiles(), 0);
  EXPECT_EQ(e.kernel_swaps(), 1);
  EXPECT_NE(gemm_strategy().find("epilogue overlapping"), std::string::npos) << gemm_strategy();
  ASSERT_TRUE(e.captured()) << "captured again with the kernel's own form";
  auto own = e.Run(inputs);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  auto expected = RunReference(*graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (const auto& [got, form] : {std::pair{&*stand_in, "the stand-in"}, std::pair{&*own, "the kernel's own form"}}) {
    Comparison c = CompareWithReference((*got)[0], (*expected)[0]);
    EXPECT_TRUE(c.pass) << form << ": " << c.reason;
  }
  // The next compile finds the own form in the cache: no stand-in.
  auto again = CompileForCuda(*graph, options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->pending_compiles(), 0);
  EXPECT_EQ((*again)->nvrtc_compiles(), 0);
  std::error_code ec;
  std::filesystem::remove_all(cache, ec);
}

}  // namespace
}  // namespace tilefuse
