// ParallelFor: runs body(0) ... body(count - 1) on up to `threads` threads and returns when
// all have run. Indices are handed out one at a time from a shared counter, so long items
// (a GEMM kernel's compile) and short ones share the threads without a static split; the
// calling thread works too. With threads <= 1 (or one item) it is a plain loop on the
// caller. Each index runs exactly once; the order across threads is unspecified, so the
// body writes its result to its own slot.
#pragma once

#include <cstdint>
#include <functional>

namespace tilefuse {

void ParallelFor(int64_t count, int threads, const std::function<void(int64_t)>& body);

}  // namespace tilefuse
