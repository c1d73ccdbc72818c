// Index helpers shared by the reference interpreter's kernels.
#include "reference/interpreter_kernels.h"
#include "support/check.h"

namespace tilefuse::interpreter {

int64_t DimProduct(const Shape& shape, int begin, int end) {
  int64_t product = 1;
  for (int d = begin; d < end; ++d) product *= shape[d];
  return product;
}

bool NextIndex(std::vector<int64_t>& index, const Shape& shape) {
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

std::vector<int64_t> BroadcastStrides(const Shape& in_shape, const Shape& out_shape) {
  TF_CHECK(in_shape.size() <= out_shape.size());
  std::vector<int64_t> in_strides = RowMajorStrides(in_shape);
  std::vector<int64_t> strides(out_shape.size(), 0);
  size_t offset = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d) strides[offset + d] = in_shape[d] == 1 ? 0 : in_strides[d];
  return strides;
}

}  // namespace tilefuse::interpreter
