#include "passes/layout_perm.h"

#include <algorithm>

namespace tilefuse::layout {

bool IsIdentity(const Perm& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Perm Compose(const Perm& first, const Perm& then) {
  Perm result(then.size());
  for (size_t i = 0; i < then.size(); ++i) result[i] = first[then[i]];
  return result;
}

Perm Inverse(const Perm& perm) {
  Perm inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return inverse;
}

Shape Permuted(const Shape& stored, const Perm& perm) {
  Shape shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) shape[i] = stored[perm[i]];
  return shape;
}

bool MovesOnlyUnitDims(const Shape& stored, const Perm& perm) {
  int64_t last = -1;
  for (int64_t d : perm) {
    if (stored[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

Perm AfterReduction(const Perm& perm, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;  // v's dims that survive, in x's order
  for (size_t i = 0; i < perm.size(); ++i)
    if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i))) kept.push_back(perm[i]);
  Perm result;
  for (int64_t d : kept) result.push_back(std::count_if(kept.begin(), kept.end(), [d](int64_t e) { return e < d; }));
  return result;
}

namespace {

// A run of x's non-unit dims and the run of the target's they become.
struct ReshapeGroup {
  std::vector<int64_t> x_dims, target_dims;
  int64_t position = 0;  // where the group starts among v's non-unit dims
};

// The smallest runs with equal element counts; empty when the shapes do not match.
std::vector<ReshapeGroup> MatchRuns(const Shape& x, const Shape& target) {
  std::vector<int64_t> xs, ts;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != 1) xs.push_back(static_cast<int64_t>(i));
  for (size_t j = 0; j < target.size(); ++j)
    if (target[j] != 1) ts.push_back(static_cast<int64_t>(j));
  std::vector<ReshapeGroup> groups;
  size_t i = 0, j = 0;
  while (i < xs.size() || j < ts.size()) {
    ReshapeGroup group;
    int64_t x_count = 1, target_count = 1;
    do {
      if (x_count <= target_count && i < xs.size()) {
        x_count *= x[xs[i]];
        group.x_dims.push_back(xs[i++]);
      } else if (j < ts.size()) {
        target_count *= target[ts[j]];
        group.target_dims.push_back(ts[j++]);
      } else {
        return {};
      }
    } while (x_count != target_count);
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

std::optional<ReshapedLayout> ReshapeInLayout(const Shape& stored, const Perm& perm, const Shape& target) {
  const Shape x = Permuted(stored, perm);
  if (NumElements(x) == 0 || NumElements(x) != NumElements(target)) return std::nullopt;
  std::vector<int64_t> rank_in_stored(stored.size(), -1);  // among v's non-unit dims
  int64_t next = 0;
  for (size_t d = 0; d < stored.size(); ++d)
    if (stored[d] != 1) rank_in_stored[d] = next++;
  std::vector<ReshapeGroup> groups = MatchRuns(x, target);
  for (ReshapeGroup& group : groups) {
    group.position = rank_in_stored[perm[group.x_dims[0]]];
    for (size_t k = 1; k < group.x_dims.size(); ++k)
      if (rank_in_stored[perm[group.x_dims[k]]] != group.position + static_cast<int64_t>(k)) return std::nullopt;
  }
  std::sort(groups.begin(), groups.end(), [](const ReshapeGroup& a, const ReshapeGroup& b) { return a.position < b.position; });
  // v reshaped: the groups in v's order, each a run of target dims; a unit dim of the target
  // follows the dim before it (the leading ones come first).
  std::vector<int64_t> order;
  auto take_with_unit_dims = [&](int64_t j) {
    if (j >= 0) order.push_back(j);
    for (int64_t u = j + 1; u < static_cast<int64_t>(target.size()) && target[u] == 1; ++u) order.push_back(u);
  };
  take_with_unit_dims(-1);
  for (const ReshapeGroup& group : groups)
    for (int64_t j : group.target_dims) take_with_unit_dims(j);
  ReshapedLayout result;
  result.perm.assign(target.size(), 0);
  for (size_t w = 0; w < order.size(); ++w) {
    result.stored.push_back(target[order[w]]);
    result.perm[order[w]] = static_cast<int64_t>(w);
  }
  return result;
}

}  // namespace tilefuse::layout
