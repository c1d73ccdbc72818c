// A vectorised store's register array in the CUDA templates: declared before a kernel's
// unrolled element loop, filled one element per iteration, stored as one vector after it.
// Half types convert two at a time (one cvt.rn.bf16x2 / f16x2 a pair, where one value's
// conversion is about six integer instructions: a softmax with bf16 output spent a fifth of
// its instructions an element there); the array then holds the pairs.
#pragma once

#include <string>

#include "tilefuse/dtype.h"

namespace tilefuse {

class CudaVectorStore {
 public:
  // `array` names the register array; `vector` is the elements a store moves (pairs need it
  // even), spelled kVec in the kernel, or as the number with `literal_length`.
  CudaVectorStore(DType dtype, std::string array, int vector, bool literal_length = false);

  std::string Declaration() const;                      // "uint16_t o3[kVec];"
  // Element j's statement (j a constant once unrolled), `value` in its compute type.
  std::string Element(const std::string& value) const;
  // The vector's store to `address` (an element pointer).
  std::string Store(const std::string& address, const std::string& indent) const;

 private:
  DType dtype_;
  std::string array_;
  std::string length_;  // the elements a vector holds, as the kernel spells the count
  std::string pairs_length_;  // and the pairs
  bool pairs_;
};

}  // namespace tilefuse
