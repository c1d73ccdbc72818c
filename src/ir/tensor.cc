#include "tilefuse/tensor.h"

#include <cmath>
#include <cstring>
#include <random>

#include "ir/element_access.h"
#include "support/check.h"
#include "support/host_buffer_pool.h"

namespace tilefuse {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

Tensor::Storage::Storage(size_t size) : data(HostBufferPool::Global().Allocate(size)), size(size) {}
Tensor::Storage::Storage(std::byte* borrowed, size_t size) : data(borrowed), size(size), owned(false) {}
Tensor::Storage::~Storage() {
  if (owned) HostBufferPool::Global().Release(data, size);
}

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_ = std::make_shared<Storage>(static_cast<size_t>(NumElements(t.shape_)) * DTypeSize(dtype));
  return t;
}

Tensor Tensor::Borrowed(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_ = std::make_shared<Storage>(static_cast<std::byte*>(data), static_cast<size_t>(NumElements(t.shape_)) * DTypeSize(dtype));
  return t;
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(Uninitialized(dtype, std::move(shape))) {
  std::memset(bytes_->data, 0, bytes_->size);
}

Tensor Tensor::FromDoubles(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  TF_CHECK(static_cast<int64_t>(values.size()) == t.num_elements());
  for (size_t i = 0; i < values.size(); ++i) t.SetDouble(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::Random(DType dtype, Shape shape, uint64_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v;
    if (IsFloat(dtype)) v = real(rng);
    else if (dtype == DType::kBool) v = static_cast<double>(rng() & 1);
    else v = static_cast<double>(rng() % 8);
    t.SetDouble(i, v);
  }
  return t;
}

namespace {
template <typename T>
T Load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void Store(std::byte* p, int64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}
}  // namespace

double LoadElementAsDouble(DType dtype, const std::byte* p, int64_t i) {
  switch (dtype) {
    case DType::kF64: return Load<double>(p, i);
    case DType::kF32: return Load<float>(p, i);
    case DType::kF16: return HalfBitsToFloat(Load<uint16_t>(p, i));
    case DType::kBF16: return BF16BitsToFloat(Load<uint16_t>(p, i));
    case DType::kI64: return static_cast<double>(Load<int64_t>(p, i));
    case DType::kI32: return Load<int32_t>(p, i);
    case DType::kI8: return Load<int8_t>(p, i);
    case DType::kU8: return Load<uint8_t>(p, i);
    case DType::kBool: return Load<uint8_t>(p, i) != 0 ? 1.0 : 0.0;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz:
      return Float8BitsToFloat(Load<uint8_t>(p, i), dtype);
  }
  return 0;
}

void StoreElementFromDouble(DType dtype, std::byte* p, int64_t i, double v) {
  v = RoundToDType(v, dtype);
  switch (dtype) {
    case DType::kF64: Store<double>(p, i, v); break;
    case DType::kF32: Store<float>(p, i, static_cast<float>(v)); break;
    case DType::kF16: Store<uint16_t>(p, i, FloatToHalfBits(static_cast<float>(v))); break;
    case DType::kBF16: Store<uint16_t>(p, i, FloatToBF16Bits(static_cast<float>(v))); break;
    // RoundToDType saturates a positive overflow to INT64_MAX as an f64, which is 2^63 and
    // does not convert back (undefined behaviour, caught by UBSan through the importer fuzz
    // targets).
    case DType::kI64: Store<int64_t>(p, i, v >= 0x1p63 ? INT64_MAX : static_cast<int64_t>(v)); break;
    case DType::kI32: Store<int32_t>(p, i, static_cast<int32_t>(v)); break;
    case DType::kI8: Store<int8_t>(p, i, static_cast<int8_t>(v)); break;
    case DType::kU8: Store<uint8_t>(p, i, static_cast<uint8_t>(v)); break;
    case DType::kBool: Store<uint8_t>(p, i, v != 0 ? 1 : 0); break;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz:
      Store<uint8_t>(p, i, FloatToFloat8Bits(v, dtype, !std::isinf(v))); break;
  }
}

double Tensor::GetDouble(int64_t i) const { return LoadElementAsDouble(dtype_, data(), i); }

void Tensor::SetDouble(int64_t i, double v) { StoreElementFromDouble(dtype_, data(), i, v); }

std::vector<double> Tensor::ToDoubles() const {
  std::vector<double> out(num_elements());
  for (int64_t i = 0; i < num_elements(); ++i) out[i] = GetDouble(i);
  return out;
}

void Tensor::Poison() {
  if (bytes_) std::memset(bytes_->data, 0xFF, bytes_->size);
}

}  // namespace tilefuse
