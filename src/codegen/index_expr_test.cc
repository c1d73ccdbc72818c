#include "codegen/index_expr.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

const std::vector<std::string> kVars = {"i0", "i1"};

// [batch, seq, 64] at batch 2, seq 24: its dims' sizes in the symbols (0: batch, 1: seq).
const std::vector<int64_t> kShape = {2, 24, 64};
const std::vector<SymExpr> kSizes = {SymExpr::Symbol(0), SymExpr::Symbol(1), SymExpr::Constant(64)};

TEST(IndexSizesTest, StridesAndDivisorsPrintInTheSymbols) {
  const Index flat = IndexVar(0, 2 * 24 * 64);
  const std::vector<Index> multi = Unravel(flat, kShape, &kSizes);
  // The position along seq: (i0 / 64) % seq, the divisor printed as the symbol.
  EXPECT_EQ(PrintIndex(multi[1], kVars), "((i0 / 64) % (tf_sym1))");
  EXPECT_EQ(IndexSymbols(multi[1]), (std::set<int>{1}));
  // Raveled back it is the variable itself, as without sizes.
  EXPECT_TRUE(SameIndex(Ravel(multi, kShape, &kSizes), flat));
  // Transposed to [seq, batch, 64] and raveled: the strides are the symbols' products.
  const std::vector<int64_t> moved_shape = {24, 2, 64};
  const std::vector<SymExpr> moved_sizes = {kSizes[1], kSizes[0], kSizes[2]};
  const Index moved = Ravel({multi[1], multi[0], multi[2]}, moved_shape, &moved_sizes);
  // ((s · batch + b) · 64 + c), with s = (i0 / 64) % seq and b = (i0 / 64) / seq.
  EXPECT_EQ(PrintIndex(moved, kVars), "((((i0 / 64) % (tf_sym1)) * (tf_sym0) + ((i0 / 64) / (tf_sym1))) * 64 + (i0 % 64))");
  EXPECT_EQ(EvaluateIndex(moved, {64 * 25 + 3}), (25 % 24) * 128 + (25 / 24) * 64 + 3);
}

TEST(IndexSizesTest, ArithmeticKeepsTheSymbolsOnlyWhereItIsExact) {
  const Index elements = IndexSize(2 * 24 * 64, SymExpr::Symbol(0) * SymExpr::Symbol(1) * SymExpr::Constant(64));
  EXPECT_EQ(PrintIndex(IndexDiv(elements, 64), kVars), "(tf_sym0 * tf_sym1)");
  EXPECT_EQ(PrintIndex(IndexDiv(elements, 7), kVars), "438");      // 3072 / 7: the value alone
  EXPECT_EQ(PrintIndex(IndexMod(elements, 5), kVars), "2");        // a remainder: the value
  EXPECT_EQ(PrintIndex(IndexAdd(elements, IndexConst(1)), kVars), "(tf_sym0 * tf_sym1 * 64 + 1)");
  EXPECT_EQ(PrintIndex(IndexMul(IndexMul(IndexVar(0, 10), IndexSize(24, SymExpr::Symbol(1))), 64), kVars), "i0 * (tf_sym1 * 64)");
  // Decisions are taken on values: a variable below seq at this binding needs no remainder.
  EXPECT_EQ(PrintIndex(IndexMod(IndexVar(0, 24), IndexSize(24, SymExpr::Symbol(1))), kVars), "i0");
  // A clamp's bound keeps its size; substituting a variable keeps the constants' sizes.
  const Index clamped = IndexClamp(IndexAdd(IndexVar(0, 100), IndexConst(-3)), 0, IndexSize(23, SymExpr::Symbol(1) - SymExpr::Constant(1)));
  EXPECT_EQ(PrintIndex(clamped, kVars), "tf_clamp((i0 + -3), 0, (tf_sym1 - 1))");
  EXPECT_EQ(PrintIndex(SubstituteVar(clamped, 0, IndexVar(1, 100)), kVars), "tf_clamp((i1 + -3), 0, (tf_sym1 - 1))");
}

// A concat part's element (ViT's patches after its class token: rows of 197 tokens of 768, the
// part starting at token 1): q·151296 + 768 + r. Its token is 1 + r / 768, never the class
// token's 0, which the part's position test then knows.
TEST(IndexSimplifierTest, AConstantMultipleOfTheDivisorSplitsOff) {
  const Index q = IndexVar(1, 32), r = IndexVar(0, 150528);
  const Index element = IndexAdd(IndexAdd(IndexMul(q, 151296), IndexConst(768)), r);
  const Index token = IndexMod(IndexDiv(element, 768), 197);
  EXPECT_EQ(PrintIndex(token, kVars), "((i0 / 768) + 1)");
  EXPECT_EQ(token->min, 1);
  EXPECT_EQ(token->max, 196);
  EXPECT_EQ(PrintIndex(IndexDiv(element, 768), kVars), "((i1 * 197 + 1) + (i0 / 768))");
  // Both terms of a sum split, their remainders' sum below the divisor: (q·10 + 20 + j) / 10 = q + 2.
  const Index j = IndexVar(0, 10);
  EXPECT_EQ(PrintIndex(IndexDiv(IndexAdd(IndexAdd(IndexMul(q, 10), IndexConst(20)), j), 10), kVars), "(i1 + 2)");
  EXPECT_EQ(PrintIndex(IndexMod(IndexAdd(IndexAdd(IndexMul(q, 10), IndexConst(20)), j), 10), kVars), "i0");
}

}  // namespace
}  // namespace tilefuse
