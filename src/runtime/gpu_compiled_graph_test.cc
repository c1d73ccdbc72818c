// The GPU runtime's run on caller-owned device memory (needs a GPU; skipped without one, and
// run by scripts/gpu-check.sh's `tests` stage).
#include "runtime/gpu_compiled_graph.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/cuda_driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"

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
  StatusOr<std::unique_ptr<GpuCompiledGraph>> CompileExample(const std::string& name) {
    ASSIGN_OR_RETURN(ImportedModel model, ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name));
    ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(model.graph), PassOptions{}));
    return GpuCompiledGraph::Compile(graph, GpuCompileOptions{});
  }
  CUdeviceptr Upload(const Tensor& t) {
    CUdeviceptr p = 0;
    EXPECT_EQ(device_->api().cuMemAlloc(&p, t.num_bytes()), CUDA_SUCCESS);
    EXPECT_EQ(device_->api().cuMemcpyHtoD(p, t.data(), t.num_bytes()), CUDA_SUCCESS);
    allocated_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (CUdeviceptr p : allocated_) device_->api().cuMemFree(p);
  }
  CudaDevice* device_ = nullptr;
  std::vector<CUdeviceptr> allocated_;
};

// On a stream of the caller's, into the caller's buffers: the same bits as the host-tensor run
// (the same kernels), and the outputs' prior contents (poison) all overwritten.
TEST_F(GpuRunOnDeviceTest, MatchesTheHostRunBitForBitOnTheCallersStream) {
  for (const char* example : {"layernorm_manual.onnxtxt", "mlp_block.onnxtxt"}) {
    SCOPED_TRACE(example);
    auto compiled = CompileExample(example);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    ASSERT_TRUE((*compiled)->captured());
    const Graph& g = (*compiled)->graph();
    std::vector<Tensor> inputs;
    std::vector<uint64_t> input_ptrs, output_ptrs;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Node& p = g.node(g.inputs()[i]);
      inputs.push_back(Tensor::Random(p.dtype, p.shape, 11 + i));
      input_ptrs.push_back(Upload(inputs.back()));
    }
    auto expected = (*compiled)->Run(inputs);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    std::vector<Tensor> poison;
    for (const Tensor& e : *expected) {
      Tensor t(e.dtype(), e.shape());
      std::memset(t.data(), 0xFF, t.num_bytes());
      output_ptrs.push_back(Upload(t));
      poison.push_back(std::move(t));
    }
    CUstream stream = nullptr;
    ASSERT_EQ(device_->api().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    Status ran = (*compiled)->RunOnDevice(input_ptrs, output_ptrs, reinterpret_cast<uint64_t>(stream));
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    ASSERT_EQ(device_->api().cuStreamSynchronize(stream), CUDA_SUCCESS);
    device_->api().cuStreamDestroy(stream);
    for (size_t o = 0; o < expected->size(); ++o) {
      Tensor got((*expected)[o].dtype(), (*expected)[o].shape());
      ASSERT_EQ(device_->api().cuMemcpyDtoH(got.data(), output_ptrs[o], got.num_bytes()), CUDA_SUCCESS);
      EXPECT_EQ(std::memcmp(got.data(), (*expected)[o].data(), got.num_bytes()), 0) << "output " << o;
    }
  }
}

TEST_F(GpuRunOnDeviceTest, WrongNumberOfPointersIsAnError) {
  auto compiled = CompileExample("layernorm_manual.onnxtxt");
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  Status ran = (*compiled)->RunOnDevice({}, {}, 0);
  EXPECT_EQ(ran.code(), StatusCode::kInvalidArgument) << ran.ToString();
  EXPECT_NE(ran.message().find("device pointers"), std::string::npos) << ran.ToString();
}

}  // namespace
}  // namespace tilefuse
