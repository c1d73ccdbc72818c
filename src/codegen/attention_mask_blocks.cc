#include "codegen/attention_mask_blocks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/kernel_printer.h"
#include "support/answer_cache.h"
#include "support/parallel_for.h"

namespace tilefuse {

namespace {

constexpr double kMasked = -1e4;          // a logit at most this contributes exp(...) = 0
constexpr double kScoreBound = 1e3;       // |logit of a real score| is taken to stay below this
constexpr int64_t kMaxScan = 1 << 16;     // constant elements scanned for one load's range
constexpr int64_t kMaxEvaluations = 4 << 20;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Interval {
  double lo = -kInf, hi = kInf;
  bool Point() const { return lo == hi; }
  bool Known() const { return std::isfinite(lo) || std::isfinite(hi) || lo == hi; }
};

class IntervalEvaluator {
 public:
  IntervalEvaluator(const Graph& g, const AttentionLogits& a) : g_(g), a_(a), cache_(a.program.values.size()) {}

  // Evaluates for scores of rows `srow` (flat over the score batch) and keys `key`.
  void Bind(Interval srow, Interval key) {
    vars_[0] = srow;
    vars_[1] = key;
    std::fill(cache_.begin(), cache_.end(), std::nullopt);
  }

  // What the program's leaves take under the binding: the range of each index value and of
  // the elements each load reads. Two bindings with equal keys evaluate alike, so a caller
  // may remember answers by it: the heads of a batch read one mask's rows, and the scans of
  // a constant table are what the analysis spends its time on.
  std::string LeafKey() {
    std::string key;
    for (const ScalarValue& s : a_.program.values) {
      if (s.kind != ScalarValue::Kind::kIndex && !(s.kind == ScalarValue::Kind::kLoad && s.buffer >= 0)) continue;
      const Interval iv = Index(s.index);
      key.append(reinterpret_cast<const char*>(&iv), sizeof iv);
    }
    return key;
  }

  // An upper bound of logit `v` that holds whatever the scores are, when it is masked
  // (at most kMasked); +inf otherwise.
  double MaskedBound(int v) {
    const ScalarValue& s = a_.program.values[v];
    const Interval iv = Value(v);
    if (iv.hi <= kMasked) return iv.hi;
    if (s.kind != ScalarValue::Kind::kOp) return kInf;
    auto bound = [](double b) { return b <= kMasked ? b : kInf; };
    switch (s.op) {
      case OpCode::kCast: return MaskedBound(s.args[0]);
      case OpCode::kAdd:
        return bound(std::min(MaskedBound(s.args[0]) + Upper(s.args[1]), MaskedBound(s.args[1]) + Upper(s.args[0])));
      case OpCode::kSub: return bound(MaskedBound(s.args[0]) - Lower(s.args[1]));
      case OpCode::kMul: {
        const Interval l = Value(s.args[0]), r = Value(s.args[1]);
        if (r.Point() && r.lo > 0) return bound(MaskedBound(s.args[0]) * r.lo);
        if (l.Point() && l.lo > 0) return bound(MaskedBound(s.args[1]) * l.lo);
        return kInf;
      }
      case OpCode::kWhere: {
        const Interval c = Value(s.args[0]);
        if (c.lo > 0 || c.hi < 0) return MaskedBound(s.args[1]);  // always true (nonzero)
        if (c.Point() && c.lo == 0) return MaskedBound(s.args[2]);
        return std::max(MaskedBound(s.args[1]), MaskedBound(s.args[2]));
      }
      default: return kInf;
    }
  }

  // Is logit `v` provably not masked (a real score's logit, not a mask's constant)?
  // The arm each select reachable from `v` takes over the bound ranges (1: true, 2: false)
  // into `arms`; false when one is undecided. A select's condition is not followed: only
  // the values the logit takes.
  bool Decide(int v, std::vector<int8_t>& arms, std::vector<bool>& seen) {
    if (seen[v]) return true;
    seen[v] = true;
    const ScalarValue& s = a_.program.values[v];
    if (s.kind != ScalarValue::Kind::kOp) return true;
    if (s.op == OpCode::kWhere) {
      const Interval c = Value(s.args[0]);
      const int arm = c.lo > 0 || c.hi < 0 ? 1 : c.Point() && c.lo == 0 ? 2 : 0;
      if (arm == 0) return false;
      arms[v] = static_cast<int8_t>(arm);
      return Decide(s.args[arm], arms, seen);
    }
    for (int arg : s.args)
      if (!Decide(arg, arms, seen)) return false;
    return true;
  }

  bool Unmasked(int v) {
    const ScalarValue& s = a_.program.values[v];
    const Interval iv = Value(v);
    if (std::isfinite(iv.lo) && std::isfinite(iv.hi) && iv.lo > kMasked) return true;  // a score-free value, bounded
    switch (s.kind) {
      case ScalarValue::Kind::kLoad:
        if (s.buffer < 0) return true;  // the score itself
        [[fallthrough]];
      case ScalarValue::Kind::kConstant: case ScalarValue::Kind::kIndex: return false;  // bounded ones returned above
      case ScalarValue::Kind::kOp: {
        if (s.op == OpCode::kWhere) {
          const Interval c = Value(s.args[0]);
          if (c.lo > 0 || c.hi < 0) return Unmasked(s.args[1]);
          if (c.Point() && c.lo == 0) return Unmasked(s.args[2]);
          return Unmasked(s.args[1]) && Unmasked(s.args[2]);
        }
        // Comparisons and logic only feed selects' conditions: their inputs may be anything.
        if (GetOpInfo(s.op).result == ResultDType::Bool) return true;
        for (int arg : s.args)
          if (!Unmasked(arg)) return false;
        return true;
      }
      default: return false;
    }
  }

 private:
  double Upper(int v) {
    const Interval iv = Value(v);
    return std::isfinite(iv.hi) ? iv.hi : kScoreBound;
  }
  double Lower(int v) {
    const Interval iv = Value(v);
    return std::isfinite(iv.lo) ? iv.lo : -kScoreBound;
  }

  Interval Index(const tilefuse::Index& e) {
    using K = IndexExpr::Kind;
    switch (e->kind) {
      case K::kConst: return {static_cast<double>(e->value), static_cast<double>(e->value)};
      case K::kVar: return e->value < 2 ? vars_[e->value] : Interval{};
      case K::kAdd: {
        Interval l = Index(e->a), r = Index(e->b);
        return {l.lo + r.lo, l.hi + r.hi};
      }
      case K::kMul: {
        Interval l = Index(e->a);
        double c = static_cast<double>(e->b->value);
        return c >= 0 ? Interval{l.lo * c, l.hi * c} : Interval{l.hi * c, l.lo * c};
      }
      case K::kDiv: {
        Interval l = Index(e->a);
        double c = static_cast<double>(e->b->value);
        return {std::floor(l.lo / c), std::floor(l.hi / c)};
      }
      case K::kMod: {
        Interval l = Index(e->a);
        double c = static_cast<double>(e->b->value);
        if (std::isfinite(l.lo) && std::isfinite(l.hi) && std::floor(l.lo / c) == std::floor(l.hi / c))
          return {l.lo - c * std::floor(l.lo / c), l.hi - c * std::floor(l.hi / c)};
        return {0, c - 1};
      }
      case K::kClamp: {
        Interval l = Index(e->a);
        double lo = static_cast<double>(e->value), hi = static_cast<double>(e->b->value);
        return {std::clamp(l.lo, lo, hi), std::clamp(l.hi, lo, hi)};
      }
      case K::kValue: return {};
    }
    return {};
  }

  // The range of a constant buffer's elements over an index range (a scan of at most kMaxScan).
  Interval ConstantLoad(const ScalarValue& s) {
    const Node& n = g_.node(a_.buffers[s.buffer].node);
    if (n.op != OpCode::kConstant || !n.attrs.value) return {};
    const Interval at = Index(s.index);
    if (!std::isfinite(at.lo) || !std::isfinite(at.hi) || at.hi - at.lo >= kMaxScan || at.lo < 0 ||
        at.hi >= static_cast<double>(n.attrs.value->num_elements()))
      return {};
    Interval out{kInf, -kInf};
    for (int64_t i = static_cast<int64_t>(at.lo); i <= static_cast<int64_t>(at.hi); ++i) {
      double v = n.attrs.value->GetDouble(i);
      if (std::isnan(v)) return {};
      out.lo = std::min(out.lo, v);
      out.hi = std::max(out.hi, v);
    }
    return out;
  }

  Interval Value(int v) {
    if (cache_[v]) return *cache_[v];
    const ScalarValue& s = a_.program.values[v];
    Interval out;
    switch (s.kind) {
      case ScalarValue::Kind::kConstant: out = {s.constant, s.constant}; break;
      case ScalarValue::Kind::kIndex: out = Index(s.index); break;
      case ScalarValue::Kind::kLoad: out = s.buffer < 0 ? Interval{} : ConstantLoad(s); break;
      case ScalarValue::Kind::kOp: out = RoundedTo(s.dtype, Op(s)); break;
      default: break;
    }
    cache_[v] = out;
    return out;
  }

  // The graph rounds every op's result to its dtype: a half type's interval widens by its
  // rounding (so a bf16 value compared with an index is never taken as exact).
  static Interval RoundedTo(DType dtype, Interval x) {
    if (dtype != DType::kBF16 && dtype != DType::kF16) return x;
    const double eps = dtype == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
    return {x.lo - std::fabs(x.lo) * eps, x.hi + std::fabs(x.hi) * eps};
  }

  static Interval Truth(bool always, bool never) { return always ? Interval{1, 1} : never ? Interval{0, 0} : Interval{0, 1}; }

  Interval Op(const ScalarValue& s) {
    std::vector<Interval> x;
    for (int arg : s.args) x.push_back(Value(arg));
    switch (s.op) {
      case OpCode::kCast:
        if (s.dtype == DType::kBool) return Truth(x[0].lo > 0 || x[0].hi < 0, x[0].Point() && x[0].lo == 0);
        if (IsFloat(s.dtype)) return x[0];
        return {std::trunc(x[0].lo), std::trunc(x[0].hi)};
      case OpCode::kNeg: return {-x[0].hi, -x[0].lo};
      case OpCode::kAdd: return {x[0].lo + x[1].lo, x[0].hi + x[1].hi};
      case OpCode::kSub: return {x[0].lo - x[1].hi, x[0].hi - x[1].lo};
      case OpCode::kMul: {
        if (!x[0].Known() || !x[1].Known()) return {};
        double p[] = {x[0].lo * x[1].lo, x[0].lo * x[1].hi, x[0].hi * x[1].lo, x[0].hi * x[1].hi};
        for (double q : p)
          if (std::isnan(q)) return {};
        return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
      case OpCode::kMax: return {std::max(x[0].lo, x[1].lo), std::max(x[0].hi, x[1].hi)};
      case OpCode::kMin: return {std::min(x[0].lo, x[1].lo), std::min(x[0].hi, x[1].hi)};
      case OpCode::kNot: return Truth(x[0].Point() && x[0].lo == 0, x[0].lo > 0 || x[0].hi < 0);
      case OpCode::kAnd: return Truth(x[0].lo >= 1 && x[1].lo >= 1, x[0].hi <= 0 || x[1].hi <= 0);
      case OpCode::kOr: return Truth(x[0].lo >= 1 || x[1].lo >= 1, x[0].hi <= 0 && x[1].hi <= 0);
      case OpCode::kEqual: return Truth(x[0].Point() && x[1].Point() && x[0].lo == x[1].lo, x[0].hi < x[1].lo || x[1].hi < x[0].lo);
      case OpCode::kLess: return Truth(x[0].hi < x[1].lo, x[0].lo >= x[1].hi);
      case OpCode::kLessEqual: return Truth(x[0].hi <= x[1].lo, x[0].lo > x[1].hi);
      case OpCode::kGreater: return Truth(x[0].lo > x[1].hi, x[0].hi <= x[1].lo);
      case OpCode::kGreaterEqual: return Truth(x[0].lo >= x[1].hi, x[0].hi < x[1].lo);
      case OpCode::kWhere: {
        if (x[0].lo > 0 || x[0].hi < 0) return x[1];
        if (x[0].Point() && x[0].lo == 0) return x[2];
        return {std::min(x[1].lo, x[2].lo), std::max(x[1].hi, x[2].hi)};
      }
      default: return {};
    }
  }

  const Graph& g_;
  const AttentionLogits& a_;
  Interval vars_[2];
  std::vector<std::optional<Interval>> cache_;
};

// The analyses run a query block per thread, on every core: a cold compile waits for them
// (GPT-2 8x512's first attention layer, 8 query blocks of 96 score batches x 64 rows, about 1 s
// on one core of the GPU host).
int AnalysisThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Rows one by one where the mask is a constant table (its rows are not contiguous
// ranges of the table), else each query block's rows as one interval.
int64_t RowsPerStep(const AttentionLogits& a, int block_m) {
  for (const ScalarValue& v : a.program.values)
    if (v.kind == ScalarValue::Kind::kLoad && v.buffer >= 0) return 1;
  return block_m;
}

// `program` with the selects `arms` decides replaced by their arm, and `x + 0`, `x * 1`
// by x (same dtype); returns the new id of `logit`.
int ResolveSelects(Kernel& program, int logit, const std::vector<int8_t>& arms) {
  std::vector<int> forward(program.values.size());
  for (size_t v = 0; v < program.values.size(); ++v) {
    ScalarValue& s = program.values[v];
    forward[v] = static_cast<int>(v);
    if (s.kind != ScalarValue::Kind::kOp) continue;
    for (int& arg : s.args) arg = forward[arg];
    auto constant = [&](int arg, double c) {
      const ScalarValue& x = program.values[arg];
      return x.kind == ScalarValue::Kind::kConstant && x.constant == c;
    };
    auto same_dtype = [&](int arg) { return program.values[arg].dtype == s.dtype; };
    if (s.op == OpCode::kWhere && arms[v] != 0) {
      forward[v] = s.args[arms[v]];
    } else if (s.op == OpCode::kAdd || s.op == OpCode::kMul) {
      const double identity = s.op == OpCode::kAdd ? 0 : 1;
      for (int side = 0; side < 2; ++side)
        if (constant(s.args[side], identity) && same_dtype(s.args[1 - side])) forward[v] = s.args[1 - side];
    }
  }
  return forward[logit];
}

}  // namespace

bool InteriorLogits::Any() const {
  for (const KeyBlockRange& r : blocks)
    if (r.first <= r.last) return true;
  return false;
}

namespace {

// What an analysis answers, as remembered: per query block a range of key blocks and, for the
// interior analysis, the arm each select of the logits program takes there (empty: none).
struct BlockAnswer {
  std::vector<KeyBlockRange> blocks;
  std::vector<int8_t> arms;
};

}  // namespace

static BlockAnswer ComputeInteriorKeyBlocks(const Graph& g, const AttentionLogits& a, int block_m, int block_n) {
  const int m_blocks = static_cast<int>((a.nq + block_m - 1) / block_m);
  const int full_blocks = static_cast<int>(a.nk / block_n);
  const int64_t score_batches = a.score_batch_index->max + 1;
  const int64_t rows_per_step = RowsPerStep(a, block_m);
  BlockAnswer out{std::vector<KeyBlockRange>(m_blocks, KeyBlockRange{0, -1}), {}};
  if (full_blocks == 0 || score_batches * ((a.nq + rows_per_step - 1) / rows_per_step) * full_blocks > kMaxEvaluations) return out;
  // Per block, how its selects go (empty: undecided somewhere, or not the same everywhere).
  using Arms = std::vector<int8_t>;
  std::vector<std::vector<Arms>> decided(m_blocks, std::vector<Arms>(full_blocks));
  std::vector<std::vector<bool>> usable(m_blocks, std::vector<bool>(full_blocks, true));
  const size_t n = a.program.values.size();
  // Query blocks are independent: one thread each (see AnalysisThreads).
  ParallelFor(m_blocks, AnalysisThreads(), [&](int64_t query_block) {
    const int mb = static_cast<int>(query_block);
    IntervalEvaluator eval(g, a);
    std::unordered_map<std::string, std::optional<Arms>> answers;  // by LeafKey: how the selects go, if decided
    const int64_t mb_end = std::min<int64_t>(a.nq, int64_t{mb + 1} * block_m);
    for (int kb = 0; kb < full_blocks; ++kb) {
      const Interval keys{static_cast<double>(int64_t{kb} * block_n), static_cast<double>(int64_t{kb + 1} * block_n - 1)};
      for (int64_t sb = 0; sb < score_batches && usable[mb][kb]; ++sb)
        for (int64_t r0 = int64_t{mb} * block_m; r0 < mb_end && usable[mb][kb]; r0 += rows_per_step) {
          const int64_t r1 = std::min(mb_end, r0 + rows_per_step) - 1;
          eval.Bind({static_cast<double>(sb * a.nq + r0), static_cast<double>(sb * a.nq + r1)}, keys);
          auto [it, fresh] = answers.try_emplace(eval.LeafKey());
          if (fresh) {
            Arms arms(n, 0);
            std::vector<bool> seen(n, false);
            it->second = eval.Decide(a.logit, arms, seen) && eval.Unmasked(a.logit) ? std::optional<Arms>(std::move(arms)) : std::nullopt;
          }
          const std::optional<Arms>& arms = it->second;
          if (!arms || (!decided[mb][kb].empty() && decided[mb][kb] != *arms))
            usable[mb][kb] = false;
          else
            decided[mb][kb] = *arms;
        }
    }
  });
  std::map<Arms, int> count;
  for (int mb = 0; mb < m_blocks; ++mb)
    for (int kb = 0; kb < full_blocks; ++kb)
      if (usable[mb][kb]) ++count[decided[mb][kb]];
  if (count.empty()) return out;
  const Arms* best = nullptr;
  int best_count = 0;
  for (const auto& [arms, c] : count)
    if (c > best_count) best = &arms, best_count = c;
  // Per query block, the longest run of blocks going the chosen way.
  for (int mb = 0; mb < m_blocks; ++mb)
    for (int kb = 0, run = 0; kb < full_blocks; ++kb) {
      run = usable[mb][kb] && decided[mb][kb] == *best ? run + 1 : 0;
      if (run > out.blocks[mb].last - out.blocks[mb].first + 1) out.blocks[mb] = {kb - run + 1, kb};
    }
  out.arms = *best;
  return out;
}

std::optional<double> ScoreMultiplier(const Kernel& program, int logit) {
  auto skip_casts = [&](int v) {
    while (program.values[v].kind == ScalarValue::Kind::kOp && program.values[v].op == OpCode::kCast && program.values[v].dtype == DType::kF32)
      v = program.values[v].args[0];
    return v;
  };
  auto is_score = [&](int v) {
    const ScalarValue& s = program.values[v];
    return s.kind == ScalarValue::Kind::kLoad && s.buffer < 0;
  };
  const int v = skip_casts(logit);
  if (is_score(v)) return 1.0;
  const ScalarValue& s = program.values[v];
  // Half-precision values are computed in f32 (ComputeType), so a bf16 product is an f32 one.
  const bool f32_arithmetic = s.dtype == DType::kF32 || s.dtype == DType::kBF16 || s.dtype == DType::kF16;
  if (s.kind != ScalarValue::Kind::kOp || s.op != OpCode::kMul || !f32_arithmetic) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ScalarValue& c = program.values[s.args[side]];
    if (c.kind == ScalarValue::Kind::kConstant && c.constant > 0 && std::isfinite(c.constant) && is_score(skip_casts(s.args[1 - side])))
      return c.constant;
  }
  return std::nullopt;
}

static BlockAnswer ComputeUnmaskedKeyBlocks(const Graph& g, const AttentionLogits& a, int block_m, int block_n) {
  const int m_blocks = static_cast<int>((a.nq + block_m - 1) / block_m);
  const int key_blocks = static_cast<int>((a.nk + block_n - 1) / block_n);
  std::vector<KeyBlockRange> all(m_blocks, KeyBlockRange{0, key_blocks - 1});
  const int64_t score_batches = a.score_batch_index->max + 1;
  const int64_t rows_per_step = RowsPerStep(a, block_m);
  if (score_batches * ((a.nq + rows_per_step - 1) / rows_per_step) * (key_blocks + 3) > kMaxEvaluations) return {all, {}};
  std::vector<KeyBlockRange> out(m_blocks, KeyBlockRange{key_blocks, -1});
  ParallelFor(m_blocks, AnalysisThreads(), [&](int64_t query_block) {
    const int mb = static_cast<int>(query_block);
    IntervalEvaluator eval(g, a);
    std::unordered_map<std::string, bool> unmasked, masked;  // answers by LeafKey
    const int64_t mb_end = std::min<int64_t>(a.nq, int64_t{mb + 1} * block_m);
    bool proven = true;
    for (int64_t sb = 0; sb < score_batches && proven; ++sb)
      for (int64_t r0 = int64_t{mb} * block_m; r0 < mb_end && proven; r0 += rows_per_step) {
        const int64_t r1 = std::min(mb_end, r0 + rows_per_step) - 1;
        const Interval rows{static_cast<double>(sb * a.nq + r0), static_cast<double>(sb * a.nq + r1)};
        // Every row keeps a key that is provably unmasked.
        bool kept = false;
        for (int64_t k : {int64_t{0}, std::min(r0, a.nk - 1), std::min(r1, a.nk - 1), a.nk - 1}) {
          eval.Bind(rows, {static_cast<double>(k), static_cast<double>(k)});
          auto [it, fresh] = unmasked.try_emplace(eval.LeafKey());
          if (fresh) it->second = eval.Unmasked(a.logit);
          if (it->second) kept = true;
        }
        if (!kept) {
          proven = false;
          break;
        }
        for (int kb = 0; kb < key_blocks; ++kb) {
          if (kb >= out[mb].first && kb <= out[mb].last) continue;
          const int64_t k0 = int64_t{kb} * block_n, k1 = std::min(a.nk, k0 + block_n) - 1;
          eval.Bind(rows, {static_cast<double>(k0), static_cast<double>(k1)});
          auto [it, fresh] = masked.try_emplace(eval.LeafKey());
          if (fresh) it->second = eval.MaskedBound(a.logit) <= kMasked;
          if (it->second) continue;
          out[mb].first = std::min(out[mb].first, kb);
          out[mb].last = std::max(out[mb].last, kb);
        }
      }
    if (!proven || out[mb].first > out[mb].last) out[mb] = all[mb];
  });
  return {out, {}};
}

// The analysis scans the mask once per row of every query block for every configuration
// the planner and the emitter try, and every layer of a model shares its mask: transformers'
// GPT-2 at 8x512 (a folded 8x512x512 mask, 12 layers) spent 9.8 s of its compile here
// (H200 host, 2026-11-29). The answers are remembered by what they depend on: the logits
// program as printed, the sizes, and the mask's bytes (hashed). Within one analysis, answers
// are remembered by LeafKey, so the 12 heads of each batch share their scans: the first
// layer's analyses in GPT-2's cold plan stage went from 4.4 s to 1.5 s (H200 host, 2026-11-30).
namespace {

std::string AnalysisKey(const Graph& g, const AttentionLogits& a, int block_m, int block_n) {
  std::string key = fmt::format("{} {} {} {} {} {}\n{}", a.logit, a.nq, a.nk, block_m, block_n, a.score_batch_index->max,
                                PrintKernel(a.program));
  for (const KernelBuffer& b : a.buffers) {
    const Node& n = g.node(b.node);
    const Tensor* value = n.op == OpCode::kConstant ? n.attrs.value.get() : nullptr;
    const size_t hash = value && value->num_bytes() > 0
                            ? std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(value->data()), value->num_bytes()))
                            : 0;
    key += fmt::format("\n{} {} {} {} {}", static_cast<int>(b.dtype), b.elements, b.is_output, value != nullptr, hash);
  }
  return key;
}

// An answer as the text kept on disk: "<n> <first> <last>... | <m> <arm>...".
std::string AnswerText(const BlockAnswer& answer) {
  std::string text = fmt::format("{}", answer.blocks.size());
  for (const KeyBlockRange& r : answer.blocks) text += fmt::format(" {} {}", r.first, r.last);
  text += fmt::format(" | {}", answer.arms.size());
  for (int8_t arm : answer.arms) text += fmt::format(" {}", arm);
  return text;
}

// The answer a text holds, if it is one for `query_blocks` query blocks and `values` program
// values (a damaged or foreign entry is not).
std::optional<BlockAnswer> ParseAnswer(const std::string& text, size_t query_blocks, size_t values) {
  std::istringstream in(text);
  size_t n = 0, m = 0;
  std::string bar;
  BlockAnswer answer;
  if (!(in >> n) || n != query_blocks) return std::nullopt;
  answer.blocks.resize(n);
  for (KeyBlockRange& r : answer.blocks)
    if (!(in >> r.first >> r.last)) return std::nullopt;
  if (!(in >> bar >> m) || bar != "|" || (m != 0 && m != values)) return std::nullopt;
  answer.arms.resize(m);
  for (int8_t& arm : answer.arms) {
    int a = 0;
    if (!(in >> a) || a < 0 || a > 2) return std::nullopt;
    arm = static_cast<int8_t>(a);
  }
  return answer;
}

// The answer of `kind` for `key`: remembered in the process, else kept on disk by an earlier
// process (support/answer_cache.h: a new process compiling the same model skips the
// analysis), else computed and kept in both.
template <typename Compute>
BlockAnswer Remembered(std::string_view kind, std::string key, size_t query_blocks, size_t values, Compute compute) {
  static std::map<std::string, BlockAnswer> memo;
  static std::mutex mutex;
  key = fmt::format("{}\n{}", kind, key);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  std::optional<BlockAnswer> answer;
  if (std::optional<std::string> text = LoadAnswer("attention mask blocks", key)) {
    answer = ParseAnswer(*text, query_blocks, values);
    if (!answer) DiscardAnswer("attention mask blocks", key, "not an answer of this analysis");
  }
  if (!answer) {
    answer = compute();
    StoreAnswer("attention mask blocks", key, AnswerText(*answer));
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (memo.size() >= 256) memo.clear();  // a bound, not a policy: compiles rarely see more masks
  memo.emplace(std::move(key), *answer);
  return *answer;
}

int QueryBlocks(const AttentionLogits& a, int block_m) { return static_cast<int>((a.nq + block_m - 1) / block_m); }

}  // namespace

InteriorLogits InteriorKeyBlocks(const Graph& g, const AttentionLogits& a, int block_m, int block_n) {
  BlockAnswer answer = Remembered("interior", AnalysisKey(g, a, block_m, block_n), QueryBlocks(a, block_m), a.program.values.size(),
                                  [&] { return ComputeInteriorKeyBlocks(g, a, block_m, block_n); });
  InteriorLogits out{a.program, a.logit, std::move(answer.blocks)};
  if (!answer.arms.empty()) out.logit = ResolveSelects(out.program, a.logit, answer.arms);
  return out;
}

std::vector<KeyBlockRange> UnmaskedKeyBlocks(const Graph& g, const AttentionLogits& a, int block_m, int block_n) {
  return Remembered("unmasked", AnalysisKey(g, a, block_m, block_n), QueryBlocks(a, block_m), a.program.values.size(),
                    [&] { return ComputeUnmaskedKeyBlocks(g, a, block_m, block_n); })
      .blocks;
}

}  // namespace tilefuse
