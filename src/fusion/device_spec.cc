#include "fusion/device_spec.h"

namespace tilefuse {

namespace {
// Sources: H200 copy rate 4.22 TB/s measured on the GPU machine (shared/ANCHORS.md,
// 2026-11-21); H100 SXM copy rate about 3.0 TB/s measured there (device KINDS.md).
// Matrix rates are NVIDIA's dense datasheet figures; launch overhead is the gap
// between back-to-back small kernels. The CPU row describes this project's 2-core
// development machines and is a rough guess until the CPU backend measures it. A block alone
// on a row: max |x| over 8192² f32 as one block of 1024 threads read 268 MB in 1852 µs on an
// H100 (145 GB/s, 2026-12-07, bench/results/2026-12-07-h100-row-splits.md); the H200's SMs
// are taken as the same.
const DeviceSpec kSpecs[] = {
    {"h100-sxm", 132, 3.0e12, 989e12, 494e12, 67e12, 2.0e-6, 50e6, 227e3, 145e9},
    {"h200", 132, 4.22e12, 989e12, 494e12, 67e12, 2.0e-6, 60e6, 227e3, 145e9},
    {"cpu", 2, 10e9, 100e9, 100e9, 50e9, 5.0e-6, 32e6, 0},
};
}  // namespace

double DeviceSpec::MatmulFlops(DType dtype) const {
  if (IsHalf(dtype)) return tensor_flops_bf16;
  if (dtype == DType::kF32) return tensor_flops_f32;
  return vector_flops_f32;  // f64 and integers: no tensor-core path
}

const DeviceSpec* FindDeviceSpec(std::string_view name) {
  for (const DeviceSpec& spec : kSpecs)
    if (spec.name == name) return &spec;
  return nullptr;
}

std::vector<std::string> KnownDeviceNames() {
  std::vector<std::string> names;
  for (const DeviceSpec& spec : kSpecs) names.push_back(spec.name);
  return names;
}

}  // namespace tilefuse
