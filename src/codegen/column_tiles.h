// Which reduction kernels are column reductions — consecutive outputs read consecutive
// addresses while the reduced elements are strided — and how they read memory: the analysis
// behind the CUDA column template (codegen/cuda/cuda_column_emitter.h).
//
// A global average pool over an NHWC activation [N, H, W, C] reduces over (h, w):
//   output i0 = n·C + c,  reduced element i1 = h·W + w,  load b0[n·HWC + i1·C + c],
// so outputs c and c + 1 are neighbours in memory and one output's elements lie C apart. The
// row template gives each output a thread that walks its elements one after another (512
// threads for MobileNetV3's first SE pool, 3136 loads each); the column template gives a block
// a tile of consecutive outputs and splits the reduced elements over its threads (and over
// several blocks when the outputs are few).
//
// As for the transposed template (codegen/transposed_tiles.h) the dims come from the indices'
// own divisions and remainders: i0 and i1 are written in coordinates and every load reading
// both has a coefficient per coordinate. A load is contiguous along the outputs when the
// innermost output coordinate moves it by one element; a thread then reads `vector`
// consecutive outputs as one access where every other coefficient and the offset keep that
// access aligned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

// A load read as one vector of consecutive outputs per reduced element: its index is
// index(i0, 0) + row_offset(i1), row_offset over loop variable 1 alone.
struct ColumnLoad {
  int value = -1;
  Index column_index;  // index(i0, 0): the vector's first element at i1 = 0
  Index row_offset;    // index(i0, i1) - index(i0, 0)
};

struct ColumnTiling {
  std::vector<int64_t> output_dims, row_dims;  // i0's and i1's coordinates, outermost first
  int64_t columns = 0;        // the innermost output dim: outputs contiguous in the loads
  int vector = 1;             // the widest vector (elements) every contiguous load keeps aligned
  std::vector<ColumnLoad> loads;  // the loads contiguous along the outputs
  bool chained = false;       // a reduction reads an earlier one's result (variance after mean)
  std::string why_not;        // empty when the kernel takes the column template
  bool tiled() const { return why_not.empty(); }
};

// The column form of `kernel`, or why_not saying why it keeps the row template.
ColumnTiling FindColumnTiling(const Kernel& kernel);

// The values `roots` read, themselves included (through arguments and gathered indices).
std::vector<bool> ValuesNeeded(const Kernel& kernel, const std::vector<int>& roots);

}  // namespace tilefuse
