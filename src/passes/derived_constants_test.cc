#include "passes/derived_constants.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

TEST(DerivedConstant, IsMadeOncePerSourceAndWayWhileTheSourceLives) {
  int made = 0;
  auto doubled = [&](const Tensor& w) {
    return [&made, &w] {
      ++made;
      Tensor out(w.dtype(), w.shape());
      for (int64_t i = 0; i < w.num_elements(); ++i) out.SetDouble(i, 2 * w.GetDouble(i));
      return out;
    };
  };
  Tensor source = Tensor::Random(DType::kF32, {3, 5}, 1);
  const Tensor first = DerivedConstant(source, "doubled", doubled(source));
  const Tensor copy = source;  // another tensor over the same bytes (a second binding's import)
  const Tensor second = DerivedConstant(copy, "doubled", doubled(copy));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(first.data(), second.data());
  EXPECT_EQ(second.GetDouble(7), 2 * source.GetDouble(7));
  DerivedConstant(source, "tripled", doubled(source));  // another way: made anew
  EXPECT_EQ(made, 2);
  // Other bytes of the same values are another source.
  Tensor other = Tensor::Random(DType::kF32, {3, 5}, 1);
  const Tensor third = DerivedConstant(other, "doubled", doubled(other));
  EXPECT_EQ(made, 3);
  EXPECT_NE(third.data(), first.data());
}

TEST(DerivedConstant, IsMadeAgainOnceItsSourceIsFreed) {
  int made = 0;
  auto zeros = [&made] {
    ++made;
    return Tensor(DType::kF32, {4});
  };
  for (int round = 0; round < 3; ++round) {
    Tensor source = Tensor::Random(DType::kF32, {4}, round);  // freed at the round's end: its address may come back
    DerivedConstant(source, "zeros", zeros);
    DerivedConstant(source, "zeros", zeros);
    EXPECT_EQ(made, round + 1);
  }
}

}  // namespace
}  // namespace tilefuse
