// A dense, row-major tensor that owns its bytes in the dtype's own layout. Used for
// constants in the graph, model inputs and outputs, and test data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilefuse/dtype.h"

namespace tilefuse {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2,3,4]"
// Row-major strides in elements.
std::vector<int64_t> RowMajorStrides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  // Bytes left as they are (a kernel about to write every element): no zero fill, and a
  // reused buffer keeps its pages (support/host_buffer_pool.h).
  static Tensor Uninitialized(DType dtype, Shape shape);
  // A tensor over bytes it does not own (a caller's array, any alignment): the caller keeps them
  // alive and unchanged while this tensor or a copy of it is in use. For a run's inputs, so that a
  // call from Python does not copy them; an output that is such a tensor must be copied out.
  static Tensor Borrowed(DType dtype, Shape shape, void* data);
  bool borrowed() const { return bytes_ && !bytes_->owned; }

  // Builds a tensor from f64 values, rounding each to `dtype`.
  static Tensor FromDoubles(DType dtype, Shape shape, const std::vector<double>& values);
  // Deterministic pseudo-random values: floats uniform in [-1, 1), integers in [0, 8),
  // bool in {0, 1}. Never all zeros.
  static Tensor Random(DType dtype, Shape shape, uint64_t seed);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t num_bytes() const { return bytes_ ? bytes_->size : 0; }

  // The owner of the bytes, shared by every copy of this tensor: for a cache keyed by the bytes'
  // address, which holds it weakly to know when they are freed (and the address may be reused).
  std::shared_ptr<const void> owner() const { return bytes_; }

  std::byte* data() { return bytes_->data; }
  const std::byte* data() const { return bytes_->data; }

  // Element access by flat row-major index, as f64 (exact for all types except i64
  // values beyond 2^53).
  double GetDouble(int64_t index) const;
  void SetDouble(int64_t index, double value);  // rounds to dtype
  std::vector<double> ToDoubles() const;

  // Fills every element with the bit pattern 0xFF.. ("poison"): NaN for float types,
  // so an element a kernel forgot to write fails every comparison.
  void Poison();

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  // 64-byte aligned bytes from the host buffer pool, shared by copies of the tensor (or a
  // caller's bytes, not owned).
  struct Storage {
    explicit Storage(size_t size);
    Storage(std::byte* borrowed, size_t size);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    std::byte* data;
    size_t size;
    bool owned = true;
  };
  std::shared_ptr<Storage> bytes_;
};

}  // namespace tilefuse
