#include "support/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tilefuse {

void ParallelFor(int64_t count, int threads, const std::function<void(int64_t)>& body) {
  const int64_t workers = std::clamp<int64_t>(threads, 1, std::max<int64_t>(count, 1));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
  };
  std::vector<std::jthread> helpers;
  for (int64_t t = 1; t < workers; ++t) helpers.emplace_back(work);
  work();
  // jthread joins on destruction: every index has run when `helpers` goes.
}

}  // namespace tilefuse
