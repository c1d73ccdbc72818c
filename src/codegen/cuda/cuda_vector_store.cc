#include "codegen/cuda/cuda_vector_store.h"

#include <fmt/format.h>

#include "codegen/emit_util.h"

namespace tilefuse {

CudaVectorStore::CudaVectorStore(DType dtype, std::string array, int vector, bool literal_length)
    : dtype_(dtype),
      array_(std::move(array)),
      length_(literal_length ? std::to_string(vector) : "kVec"),
      pairs_length_(literal_length ? std::to_string(vector / 2) : "kVec / 2"),
      pairs_(IsHalf(dtype) && vector % 2 == 0) {}

std::string CudaVectorStore::Declaration() const {
  if (pairs_) return fmt::format("uint32_t {0}[{1}]; float {0}_low;", array_, pairs_length_);
  return fmt::format("{} {}[{}];", StorageType(dtype_), array_, length_);
}

// Each pair converts as its second element arrives: the floats of a whole vector held until
// the store took registers a 1024-thread softmax row did not have (44 bytes spilled).
std::string CudaVectorStore::Element(const std::string& value) const {
  if (pairs_)
    return fmt::format("if (j % 2 == 0) {0}_low = (float)({1}); else {0}[j / 2] = tf_pack2_{2}({0}_low, (float)({1}));", array_, value,
                       DTypeName(dtype_));
  return fmt::format("{}[j] = tf_pack_{}({});", array_, DTypeName(dtype_), value);
}

std::string CudaVectorStore::Store(const std::string& address, const std::string& indent) const {
  if (!pairs_) return fmt::format("{}tf_vstore<{}>({}, {});\n", indent, length_, address, array_);
  return fmt::format("{}tf_vstore<{}>(reinterpret_cast<uint32_t*>({}), {});\n", indent, pairs_length_, address, array_);
}

}  // namespace tilefuse
