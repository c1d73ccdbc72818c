#include "testing/random_graph_generator.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace tilefuse::random_graph_internal {

RandomGraphGenerator::RandomGraphGenerator(const RandomGraphOptions& options)
    : options_(options), rng_(options.seed) {}

std::vector<int64_t> RandomGraphGenerator::RandomPermutation(int n) {
  std::vector<int64_t> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[Below(i + 1)]);
  return perm;
}

// ---- shapes and dtypes

DType RandomGraphGenerator::RandomDType() {
  const auto& dtypes = options_.dtypes;
  bool has_f32 = std::find(dtypes.begin(), dtypes.end(), DType::kF32) != dtypes.end();
  if (has_f32 && Chance(0.7)) return DType::kF32;
  return PickFrom(dtypes);
}

int64_t RandomGraphGenerator::RandomDim() {
  static const std::vector<int64_t> kDims = {1, 1, 2, 3, 4, 5, 7, 8, 8, 12, 16, 16, 31, 32, 64, 128};
  return PickFrom(kDims);
}

Shape RandomGraphGenerator::ShrinkToFit(Shape shape) {
  while (!Fits(shape)) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = std::max<int64_t>(1, *largest / 2);
  }
  return shape;
}

Shape RandomGraphGenerator::RandomShape(int rank) {
  Shape shape(rank);
  for (int64_t& d : shape) d = RandomDim();
  return ShrinkToFit(shape);
}

Shape RandomGraphGenerator::SmallerBroadcastableShape(const Shape& shape) {
  size_t drop = Below(shape.size() + 1);
  Shape smaller(shape.begin() + drop, shape.end());
  for (int64_t& d : smaller)
    if (Chance(0.3)) d = 1;
  return smaller;
}

// A shape of `elements` elements and the given rank (1 when elements > 1 and rank 0):
// the prime factors are dealt out to random dims.
Shape RandomGraphGenerator::RandomFactorization(int64_t elements, int rank) {
  if (elements > 1) rank = std::max(rank, 1);
  Shape shape(rank, 1);
  int64_t rest = elements;
  for (int64_t p = 2; rest > 1; ++p) {
    if (p * p > rest) p = rest;
    while (rest % p == 0) {
      shape[Below(rank)] *= p;
      rest /= p;
    }
  }
  return shape;
}

std::optional<Shape> RandomGraphGenerator::BroadcastShape(const Shape& a, const Shape& b) const {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  if (static_cast<int>(rank) > options_.max_rank || !Fits(out)) return std::nullopt;
  return out;
}

// ---- the pool

TrackedValue RandomGraphGenerator::Track(Value v, double bound, bool exact) {
  TrackedValue tracked{v, bound, exact};
  if (v.valid()) pool_.push_back(tracked);
  return tracked;
}

TrackedValue RandomGraphGenerator::Current() {
  if (Chance(0.65)) return pool_.back();
  // Recent values more often than old ones: a random pick from the newer half, or any.
  size_t begin = Chance(0.6) ? pool_.size() / 2 : 0;
  return pool_[begin + Below(pool_.size() - begin)];
}

TrackedValue RandomGraphGenerator::Tame(const TrackedValue& x, double limit) {
  if (x.bound <= limit) return x;
  if (Chance(0.5)) return Track(b_.Unary(OpCode::kTanh, x.value), 1, false);
  return Track(b_.MulScalar(x.value, 1.0 / x.bound), 1, false);
}

TrackedValue RandomGraphGenerator::CastTo(const TrackedValue& x, DType to) {
  DType from = DTypeOf(x);
  if (from == to) return x;
  // f64 → f16/bf16 may be rounded twice (through f32) by generated code: not exact.
  bool exact = x.exact && !(from == DType::kF64 && IsHalf(to));
  return Track(b_.Cast(x.value, to), x.bound, exact);
}

TrackedValue RandomGraphGenerator::RandomConstant(DType dtype, Shape shape) {
  return {b_.Constant(Tensor::Random(dtype, std::move(shape), rng_())), 1, true};
}

TrackedValue RandomGraphGenerator::Partner(const TrackedValue& x) {
  Shape shape = ShapeOf(x);
  double roll = static_cast<double>(Below(100));
  if (options_.allow_broadcast && roll < 20) return RandomConstant(DTypeOf(x), SmallerBroadcastableShape(shape));
  if (roll < 28) return ScalarOf(PickFrom(std::vector<double>{0.5, -1.5, 2, 0.25}), DTypeOf(x));
  std::vector<size_t> candidates;
  for (size_t i = 0; i < pool_.size(); ++i) {
    Shape other = ShapeOf(pool_[i]);
    bool same_dtype = DTypeOf(pool_[i]) == DTypeOf(x);
    if ((same_dtype || options_.allow_casts) && (options_.allow_broadcast ? BroadcastShape(shape, other).has_value() : other == shape))
      candidates.push_back(i);
  }
  if (candidates.empty()) return x;
  return CastTo(pool_[PickFrom(candidates)], DTypeOf(x));
}

std::optional<TrackedValue> RandomGraphGenerator::ExactPartner(const TrackedValue& x) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < pool_.size(); ++i)
    if (pool_[i].exact && BroadcastShape(ShapeOf(x), ShapeOf(pool_[i]))) candidates.push_back(i);
  if (candidates.empty()) return std::nullopt;
  return pool_[PickFrom(candidates)];
}

void RandomGraphGenerator::AddParameters() {
  int count = static_cast<int>(Between(1, options_.max_inputs));
  int rank = static_cast<int>(Chance(0.6) ? std::clamp(2 + static_cast<int>(Below(2)), 0, options_.max_rank)
                                          : Between(0, options_.max_rank));
  Shape first = RandomShape(rank);
  DType first_dtype = RandomDType();
  for (int i = 0; i < count; ++i) {
    Shape shape = first;
    if (i > 0 && Chance(0.25)) shape = SmallerBroadcastableShape(first);
    else if (i > 0 && Chance(0.3)) shape = RandomShape(static_cast<int>(Between(0, options_.max_rank)));
    DType dtype = i == 0 || Chance(0.7) ? first_dtype : RandomDType();
    Track(b_.Parameter(fmt::format("x{}", i), dtype, shape), 1, true);
  }
}

void RandomGraphGenerator::AddOutputs() {
  TrackedValue last = pool_.back();
  OpKind kind = b_.node(last.value).info().kind;
  if (kind == OpKind::Source) last = Track(b_.Unary(OpCode::kNeg, last.value), last.bound, last.exact);
  b_.Output(last.value, "out0");
  if (!options_.allow_multiple_outputs || !Chance(0.4)) return;
  // Extra outputs: computed values nothing reads (dead ends of side branches, which
  // then stay live) or, failing those, any intermediate.
  std::vector<std::vector<int>> users = b_.graph().ComputeUsers();
  std::vector<int> dead_ends, intermediates;
  for (const TrackedValue& v : pool_) {
    int id = v.value.id;
    if (id == last.value.id || b_.node(v.value).info().kind == OpKind::Source) continue;
    (users[id].empty() ? dead_ends : intermediates).push_back(id);
  }
  std::vector<int>& candidates = dead_ends.empty() ? intermediates : dead_ends;
  int extra = std::min<int>(static_cast<int>(candidates.size()), static_cast<int>(Between(1, 2)));
  for (int i = 0; i < extra; ++i) {
    std::swap(candidates[i], candidates[i + Below(candidates.size() - i)]);
    b_.Output(Value{candidates[i]}, fmt::format("out{}", i + 1));
  }
}

// ---- steps

TrackedValue RandomGraphGenerator::Step() {
  const RandomGraphOptions& o = options_;
  struct Family {
    int weight;
    bool enabled;
    TrackedValue (RandomGraphGenerator::*build)(const TrackedValue&);
  };
  const Family families[] = {
      {18, true, &RandomGraphGenerator::UnaryOp},
      {20, true, &RandomGraphGenerator::BinaryOp},
      {6, o.allow_masks, &RandomGraphGenerator::CompareWhere},
      {4, o.allow_masks, &RandomGraphGenerator::IotaMask},
      {5, o.allow_casts && o.dtypes.size() > 1, &RandomGraphGenerator::CastOp},
      {5, o.allow_broadcast, &RandomGraphGenerator::BroadcastOp},
      {16, o.allow_views, &RandomGraphGenerator::ViewOp},
      {10, o.allow_reductions, &RandomGraphGenerator::ReductionOp},
      {4, o.allow_reductions, &RandomGraphGenerator::SoftmaxPattern},
      {3, o.allow_reductions, &RandomGraphGenerator::LayerNormPattern},
      {7, o.allow_matmul, &RandomGraphGenerator::MatMulOp},
      {2, o.allow_matmul && o.allow_reductions, &RandomGraphGenerator::AttentionPattern},
      {2, o.allow_layer_patterns && o.allow_matmul && o.allow_reductions && o.allow_views,
       &RandomGraphGenerator::MultiHeadAttentionPattern},
      {3, o.allow_layer_patterns && o.allow_matmul, &RandomGraphGenerator::GemmEpiloguePattern},
      {2, o.allow_layer_patterns && o.allow_views, &RandomGraphGenerator::ConvPattern},
      {3, o.allow_dropout, &RandomGraphGenerator::DropoutPattern},
  };
  int total = 0;
  for (const Family& f : families) total += f.enabled ? f.weight : 0;
  int roll = static_cast<int>(Below(total));
  for (const Family& f : families) {
    if (!f.enabled) continue;
    if (roll < f.weight) return (this->*f.build)(Current());
    roll -= f.weight;
  }
  return UnaryOp(Current());
}

StatusOr<Graph> RandomGraphGenerator::Generate() {
  AddParameters();
  int steps = static_cast<int>(Between(options_.min_ops, options_.max_ops));
  for (int i = 0; i < steps && b_.ok(); ++i) {
    TrackedValue result = Step();
    if (!b_.ok()) break;
    // The result is the newest pool value, so the next step likely builds on it.
    if (pool_.empty() || pool_.back().value.id != result.value.id) pool_.push_back(result);
  }
  if (b_.ok()) AddOutputs();
  auto graph = b_.Build();
  if (!graph.ok())
    return graph.status().WithContext("random graph " + DescribeRandomGraphOptions(options_) + " (a generator bug)");
  return graph;
}

}  // namespace tilefuse::random_graph_internal
