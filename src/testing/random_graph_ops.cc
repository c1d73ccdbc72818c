// Op families of the random graph generator: pointwise, masks, casts, broadcasts and
// views. Each takes the value to build on and returns the new value (already pooled or
// not; the driver pools it). Every domain-restricted op gets a guarded argument.
#include <algorithm>
#include <cmath>

#include "testing/random_graph_generator.h"

namespace tilefuse::random_graph_internal {

// ---- pointwise

TrackedValue RandomGraphGenerator::UnaryOp(const TrackedValue& x) {
  Value v = x.value;
  auto unary = [&](OpCode op, Value in) { return b_.Unary(op, in); };
  switch (Below(15)) {
    case 0: return {unary(OpCode::kExp, unary(OpCode::kTanh, v)), std::exp(1.0), false};
    case 1: return {unary(OpCode::kExp, unary(OpCode::kNeg, unary(OpCode::kAbs, v))), 1, false};
    case 2: {  // exp of a small argument
      TrackedValue small = Tame(x, 2);
      return {unary(OpCode::kExp, small.value), std::exp(small.bound), false};
    }
    case 3: return {unary(OpCode::kLog, b_.AddScalar(unary(OpCode::kAbs, v), 1)), std::log1p(x.bound), false};
    case 4: return {unary(OpCode::kTanh, v), 1, false};
    case 5: return {unary(OpCode::kSigmoid, v), 1, false};
    case 6: return {unary(OpCode::kErf, v), 1, false};
    // sin/cos of a large argument would turn the rounding of half types into noise.
    case 7: return {unary(OpCode::kSin, Tame(x, 4).value), 1, false};
    case 8: return {unary(OpCode::kCos, Tame(x, 4).value), 1, false};
    case 9: return {unary(OpCode::kRelu, v), x.bound, x.exact};
    case 10: return {unary(OpCode::kNeg, v), x.bound, x.exact};
    case 11: return {unary(OpCode::kAbs, v), x.bound, x.exact};
    case 12: return {unary(OpCode::kSqrt, unary(OpCode::kAbs, v)), std::sqrt(x.bound), false};
    case 13: {  // rsqrt(x*x + 1)
      Value t = Tame(x, 64).value;
      return {unary(OpCode::kRsqrt, b_.AddScalar(b_.Mul(t, t), 1)), 1, false};
    }
    default: return {unary(OpCode::kSigmoid, unary(OpCode::kNeg, v)), 1, false};
  }
}

TrackedValue RandomGraphGenerator::BinaryOp(const TrackedValue& x) {
  switch (Below(9)) {
    case 0: case 1: {
      TrackedValue a = Tame(x, 64), c = Tame(Partner(x), 64);
      return {b_.Binary(Chance(0.5) ? OpCode::kAdd : OpCode::kSub, a.value, c.value), a.bound + c.bound, false};
    }
    case 2: case 3: {
      TrackedValue a = Tame(x, 8), c = Tame(Partner(x), 8);
      return {b_.Mul(a.value, c.value), a.bound * c.bound, false};
    }
    case 4: {  // a / (|c| + 1): the divisor is at least 1
      TrackedValue c = Partner(x);
      return {b_.Div(x.value, b_.AddScalar(b_.Unary(OpCode::kAbs, c.value), 1)), x.bound, false};
    }
    case 5: case 6: {
      TrackedValue c = Partner(x);
      OpCode op = Chance(0.5) ? OpCode::kMax : OpCode::kMin;
      return {b_.Binary(op, x.value, c.value), std::max(x.bound, c.bound), x.exact && c.exact};
    }
    case 7: {  // small integer exponent: defined for negative bases
      TrackedValue a = Tame(x, 4);
      int exponent = static_cast<int>(Between(2, 3));
      return {b_.Binary(OpCode::kPow, a.value, b_.Scalar(exponent, DTypeOf(a))), std::pow(a.bound, exponent), false};
    }
    default: {  // (|a| + 1) ^ c with |c| <= 1: a positive base
      TrackedValue a = Tame(x, 8), c = Tame(Partner(x), 1);
      Value base = b_.AddScalar(b_.Unary(OpCode::kAbs, a.value), 1);
      return {b_.Binary(OpCode::kPow, base, c.value), a.bound + 1, false};
    }
  }
}

// where(lhs <cmp> rhs, x, y), comparing only exact values so the mask cannot flip on
// rounding; sometimes combined with a second mask through and/or/xor, or negated.
TrackedValue RandomGraphGenerator::CompareWhere(const TrackedValue& x) {
  std::optional<TrackedValue> lhs = ExactPartner(x);
  if (!lhs) return IotaMask(x);
  auto compare = [&](const TrackedValue& l) {
    static const std::vector<OpCode> kCompares = {OpCode::kLess, OpCode::kLessEqual, OpCode::kGreater,
                                                 OpCode::kGreaterEqual, OpCode::kEqual};
    TrackedValue r = ScalarOf(PickFrom(std::vector<double>{0, 0.25, -0.5}), DTypeOf(l));
    if (Chance(0.5)) {  // another exact value of the same shape and dtype, if any
      std::vector<size_t> same;
      for (size_t i = 0; i < pool_.size(); ++i)
        if (pool_[i].exact && ShapeOf(pool_[i]) == ShapeOf(l) && DTypeOf(pool_[i]) == DTypeOf(l)) same.push_back(i);
      if (!same.empty()) r = pool_[PickFrom(same)];
    }
    return b_.Binary(PickFrom(kCompares), l.value, r.value);
  };
  Value cond = compare(*lhs);
  if (Chance(0.2)) {
    static const std::vector<OpCode> kLogical = {OpCode::kAnd, OpCode::kOr, OpCode::kXor};
    cond = b_.Binary(PickFrom(kLogical), cond, compare(*lhs));
  }
  if (Chance(0.15)) cond = b_.Unary(OpCode::kNot, cond);
  TrackedValue y = Chance(0.5) ? Partner(x) : ScalarOf(0, DTypeOf(x));
  std::optional<Shape> cond_and_x = BroadcastShape(b_.shape(cond), ShapeOf(x));
  if (!cond_and_x || !BroadcastShape(*cond_and_x, ShapeOf(y))) y = ScalarOf(0, DTypeOf(x));
  return {b_.Where(cond, x.value, y.value), std::max(x.bound, y.bound), x.exact && y.exact};
}

// where(iota-based mask, x, fill): a causal (row >= column) or band mask over the last
// two dims, or a prefix mask along one axis.
TrackedValue RandomGraphGenerator::IotaMask(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return UnaryOp(x);
  Shape shape = ShapeOf(x);
  DType index_dtype = Chance(0.5) ? DType::kI64 : DType::kI32;
  static const std::vector<OpCode> kCompares = {OpCode::kGreaterEqual, OpCode::kGreater, OpCode::kLessEqual, OpCode::kLess};
  Value cond;
  if (rank >= 2 && Chance(0.6)) {
    Shape matrix = {shape[rank - 2], shape[rank - 1]};
    Value row = b_.Iota(matrix, 0, index_dtype), column = b_.Iota(matrix, 1, index_dtype);
    if (Chance(0.3)) column = b_.Add(column, b_.Scalar(static_cast<double>(Between(-2, 2)), index_dtype));
    cond = b_.Binary(PickFrom(kCompares), row, column);
  } else {
    int64_t axis = static_cast<int64_t>(Below(rank));
    Value index = b_.Iota(shape, axis, index_dtype);
    cond = b_.Binary(PickFrom(kCompares), index, b_.Scalar(static_cast<double>(Between(0, shape[axis])), index_dtype));
  }
  double fill = PickFrom(std::vector<double>{0, -1, -8});
  return {b_.Where(cond, x.value, b_.Scalar(fill, DTypeOf(x))), std::max(x.bound, std::abs(fill)), x.exact};
}

TrackedValue RandomGraphGenerator::CastOp(const TrackedValue& x) {
  DType from = DTypeOf(x), to = PickFrom(options_.dtypes);
  if (to == from) return UnaryOp(x);
  TrackedValue cast = CastTo(x, to);
  return Chance(0.3) ? CastTo(cast, from) : cast;  // sometimes a round trip
}

// ---- broadcast and views

// An explicit broadcast: size-1 dims grow and new leading dims appear, within limits.
TrackedValue RandomGraphGenerator::BroadcastOp(const TrackedValue& x) {
  Shape shape = ShapeOf(x), target = shape;
  for (int64_t& d : target) {
    int64_t grown = RandomDim();
    if (d == 1 && Chance(0.6) && NumElements(target) * grown <= options_.max_elements) d = grown;
  }
  int extra = static_cast<int>(Between(0, options_.max_rank - static_cast<int>(shape.size())));
  if (target == shape && extra == 0 && static_cast<int>(shape.size()) < options_.max_rank) extra = 1;
  for (int i = 0; i < extra; ++i) {
    int64_t dim = std::max<int64_t>(2, RandomDim());
    if (NumElements(target) * dim <= options_.max_elements) target.insert(target.begin(), dim);
  }
  if (target == shape) return UnaryOp(x);
  return {b_.BroadcastTo(x.value, target), x.bound, x.exact};
}

TrackedValue RandomGraphGenerator::ViewOp(const TrackedValue& x) {
  switch (Below(6)) {
    case 0: return ReshapeOp(x);
    case 1: return TransposeOp(x);
    case 2: return SliceOp(x);
    case 3: return SqueezeOrUnsqueeze(x);
    case 4: return ConcatOp(x);
    default: return SplitOp(x);
  }
}

TrackedValue RandomGraphGenerator::ReshapeOp(const TrackedValue& x) {
  int rank = static_cast<int>(Between(0, options_.max_rank));
  Shape shape = RandomFactorization(NumElements(ShapeOf(x)), rank);
  if (static_cast<int>(shape.size()) > options_.max_rank) return UnaryOp(x);
  return {b_.Reshape(x.value, shape), x.bound, x.exact};
}

TrackedValue RandomGraphGenerator::TransposeOp(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank < 2) return ReshapeOp(x);
  std::vector<int64_t> perm = RandomPermutation(rank);
  if (std::is_sorted(perm.begin(), perm.end())) std::swap(perm[rank - 2], perm[rank - 1]);
  return {b_.Transpose(x.value, perm), x.bound, x.exact};
}

// ONNX-style slices over random axes: positive or negative steps, indices sometimes
// written from the end, ends sometimes far out of range (clamped).
TrackedValue RandomGraphGenerator::SliceOp(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return ReshapeOp(x);
  Shape shape = ShapeOf(x);
  std::vector<int64_t> starts, ends, axes, steps;
  int64_t forced_axis = static_cast<int64_t>(Below(rank));
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (axis != forced_axis && Chance(0.5)) continue;
    int64_t dim = shape[axis], step = PickFrom(std::vector<int64_t>{1, 1, 2, 3, -1, -2});
    int64_t start = Between(0, dim - 1), end;
    int64_t raw_start = Chance(0.3) ? start - dim : start, raw_end;
    if (step > 0) {
      end = Between(start + 1, dim);
      raw_end = end == dim ? (Chance(0.5) ? dim : int64_t{1} << 40) : (Chance(0.3) ? end - dim : end);
    } else {
      end = Between(-1, start - 1);
      raw_end = end == -1 ? (Chance(0.5) ? -dim - 1 : -(int64_t{1} << 40)) : (Chance(0.3) ? end - dim : end);
    }
    starts.push_back(raw_start);
    ends.push_back(raw_end);
    axes.push_back(Chance(0.3) ? axis - rank : axis);
    steps.push_back(step);
  }
  return {b_.Slice(x.value, starts, ends, axes, steps), x.bound, x.exact};
}

TrackedValue RandomGraphGenerator::SqueezeOrUnsqueeze(const TrackedValue& x) {
  Shape shape = ShapeOf(x);
  int rank = static_cast<int>(shape.size());
  std::vector<int64_t> ones;
  for (int d = 0; d < rank; ++d)
    if (shape[d] == 1) ones.push_back(Chance(0.3) ? d - rank : d);
  if (!ones.empty() && (Chance(0.5) || rank == options_.max_rank)) {
    if (Chance(0.3)) return {b_.Squeeze(x.value, {}), x.bound, x.exact};  // every size-1 dim
    std::vector<int64_t> axes = {PickFrom(ones)};
    return {b_.Squeeze(x.value, axes), x.bound, x.exact};
  }
  if (rank >= options_.max_rank) return ReshapeOp(x);
  int out_rank = rank + static_cast<int>(Between(1, options_.max_rank - rank));
  std::vector<int64_t> positions = RandomPermutation(out_rank);
  positions.resize(out_rank - rank);
  return {b_.Unsqueeze(x.value, positions), x.bound, x.exact};
}

// Concatenates x with pool values that match it off the axis (or with pieces of x
// itself: [x[k:], x[:k]] is a roll), within max_elements.
TrackedValue RandomGraphGenerator::ConcatOp(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return SqueezeOrUnsqueeze(x);
  Shape shape = ShapeOf(x);
  int64_t axis = static_cast<int64_t>(Below(rank)), dim = shape[axis];
  std::vector<TrackedValue> parts = {x};
  if (dim >= 2 && Chance(0.3)) {
    int64_t k = Between(1, dim - 1);
    parts = {{b_.Slice(x.value, {k}, {dim}, {axis}, {1}), x.bound, x.exact},
             {b_.Slice(x.value, {0}, {k}, {axis}, {1}), x.bound, x.exact}};
  } else {
    int count = static_cast<int>(Between(2, 3));
    int64_t elements = NumElements(shape);
    for (int i = 1; i < count; ++i) {
      std::vector<size_t> matching;
      for (size_t j = 0; j < pool_.size(); ++j) {
        Shape other = ShapeOf(pool_[j]);
        if (other.size() != shape.size() || (!options_.allow_casts && DTypeOf(pool_[j]) != DTypeOf(x))) continue;
        other[axis] = dim;
        if (other == shape) matching.push_back(j);
      }
      TrackedValue part = matching.empty() || Chance(0.2) ? x : pool_[PickFrom(matching)];
      if (elements + NumElements(ShapeOf(part)) > options_.max_elements) break;
      elements += NumElements(ShapeOf(part));
      parts.push_back(CastTo(part, DTypeOf(x)));
    }
  }
  if (parts.size() < 2) return SliceOp(x);
  std::swap(parts[0], parts[Below(parts.size())]);
  std::vector<Value> values;
  double bound = 0;
  bool exact = true;
  for (const TrackedValue& p : parts) {
    values.push_back(p.value);
    bound = std::max(bound, p.bound);
    exact = exact && p.exact;
  }
  return {b_.Concat(values, Chance(0.3) ? axis - rank : axis), bound, exact};
}

TrackedValue RandomGraphGenerator::SplitOp(const TrackedValue& x) {
  Shape shape = ShapeOf(x);
  std::vector<int64_t> splittable;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] >= 2) splittable.push_back(static_cast<int64_t>(d));
  if (splittable.empty()) return SqueezeOrUnsqueeze(x);
  int64_t axis = PickFrom(splittable), dim = shape[axis];
  int64_t first = Between(1, dim - 1);
  std::vector<int64_t> sizes = {first, dim - first};
  if (sizes[1] >= 2 && Chance(0.4)) {
    int64_t second = Between(1, sizes[1] - 1);
    sizes = {first, second, dim - first - second};
  }
  std::vector<Value> parts = b_.Split(x.value, axis, sizes);
  if (parts.empty()) return x;  // the builder failed; Generate reports it
  return {PickFrom(parts), x.bound, x.exact};
}

}  // namespace tilefuse::random_graph_internal
