// Device specifications for the cost model: data, in one place, easy to recalibrate.
// Bandwidths are measured device-to-device copy rates (bytes read + written), not
// datasheet peaks, because that is what a memory-bound kernel can reach.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tilefuse/dtype.h"

namespace tilefuse {

struct DeviceSpec {
  std::string name;
  int compute_units = 0;            // SMs, or CPU cores
  double bandwidth_bytes_per_s = 0; // measured copy rate
  double tensor_flops_bf16 = 0;     // dense matrix rate for f16/bf16 (tensor cores)
  double tensor_flops_f32 = 0;      // dense matrix rate for f32 (TF32 on GPUs)
  double vector_flops_f32 = 0;      // pointwise/reduction arithmetic rate
  double launch_overhead_s = 0;     // per kernel, as seen between back-to-back kernels
  double l2_bytes = 0;
  double shared_memory_per_block = 0;
  // The rate one block reading a row alone reaches (a row kernel's block per row: an SM's
  // share); 0 where a row is not one block's (the CPU's loops split rows over threads).
  double row_block_bytes_per_s = 0;

  // Peak rate for a matrix product of this dtype, and for elementwise arithmetic.
  double MatmulFlops(DType dtype) const;
};

// Known devices: "h100-sxm", "h200", "cpu". Returns nullptr for an unknown name.
const DeviceSpec* FindDeviceSpec(std::string_view name);
std::vector<std::string> KnownDeviceNames();

}  // namespace tilefuse
