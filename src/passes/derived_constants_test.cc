#include "passes/derived_constants.h"

#include <gtest/gtest.h>

#include <memory>

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
  const std::shared_ptr<const Tensor> first = DerivedConstant(source, "doubled", doubled(source));
  const Tensor copy = source;  // another tensor over the same bytes (a second binding's import)
  const std::shared_ptr<const Tensor> second = DerivedConstant(copy, "doubled", doubled(copy));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(first, second);
  EXPECT_EQ(second->GetDouble(7), 2 * source.GetDouble(7));
  const std::shared_ptr<const Tensor> tripled = DerivedConstant(source, "tripled", doubled(source));  // another way: made anew
  EXPECT_EQ(made, 2);
  // Other bytes of the same values are another source.
  Tensor other = Tensor::Random(DType::kF32, {3, 5}, 1);
  const std::shared_ptr<const Tensor> third = DerivedConstant(other, "doubled", doubled(other));
  EXPECT_EQ(made, 3);
  EXPECT_NE(third->data(), first->data());
}

TEST(DerivedConstant, IsMadeAgainOnceItsSourceIsFreed) {
  int made = 0;
  auto zeros = [&made] {
    ++made;
    return Tensor(DType::kF32, {4});
  };
  for (int round = 0; round < 3; ++round) {
    Tensor source = Tensor::Random(DType::kF32, {4}, round);  // freed at the round's end: its address may come back
    const std::shared_ptr<const Tensor> held = DerivedConstant(source, "zeros", zeros);
    DerivedConstant(source, "zeros", zeros);
    EXPECT_EQ(made, round + 1);
  }
}

// Nothing but the graphs keeps a derived constant: once none holds it, the next call makes it
// anew (and a model dropped leaves no copy of its weights behind).
TEST(DerivedConstant, IsNotKeptWhenNoGraphHoldsIt) {
  int made = 0;
  auto zeros = [&made] {
    ++made;
    return Tensor(DType::kF32, {4});
  };
  Tensor source = Tensor::Random(DType::kF32, {4}, 9);
  std::weak_ptr<const Tensor> first = DerivedConstant(source, "zeros", zeros);
  EXPECT_TRUE(first.expired());
  DerivedConstant(source, "zeros", zeros);
  EXPECT_EQ(made, 2);
}

}  // namespace
}  // namespace tilefuse
