// Device-event timing of calls queued ahead of the GPU. Timed one at a time on an idle
// stream, a call's events can also time the host submitting it (a template's launch first
// encodes its tensor maps on the host; a captured graph's launch measured no difference on
// an H200, bench/results/2026-11-28-h200-memory-bound.md).
// Here the stream first runs a GPU sleep longer than the host takes to queue a chunk of
// calls with their events, and then runs them back to back, so each pair of events
// brackets the GPU's work alone — as bench/peers.py times PyTorch's kernels behind
// torch.cuda._sleep. A sleep, not a gate the host opens: nothing can wait forever.
#pragma once

#include <functional>
#include <vector>

#include "backend/cuda/cuda_driver.h"

namespace tilefuse {

// Calls `enqueue(i)` for i in [0, count) on the device's stream and returns each call's
// GPU time in microseconds. `enqueue` should only queue asynchronous work on that stream:
// a call that waits for the stream is timed with its host time, as before. An error while
// queueing is returned once the calls queued before it have run.
StatusOr<std::vector<double>> TimeQueuedCalls(CudaDevice& device, int count, const std::function<Status(int)>& enqueue);

}  // namespace tilefuse
