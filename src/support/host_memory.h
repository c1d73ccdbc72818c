// Resource limits as errors: before tilefuse allocates memory whose size comes from a
// model (its shapes, its constants, its intermediates), it asks here whether the host
// can hold it, so an oversized model is a ResourceExhausted naming what needed the
// memory, not a std::bad_alloc abort or, worse, an OOM kill after the pages were touched.
//
// The budget is the memory the host can still give: MemAvailable (/proc/meminfo), or the
// cgroup's limit minus its usage where that is less. TILEFUSE_HOST_MEMORY_MB overrides it
// (tests use a small budget to exercise the refusal without allocating anything).
#pragma once

#include <cstdint>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// Bytes the host can still allocate (re-read on each call).
int64_t HostMemoryBudgetBytes();

// ResourceExhausted "<what> needs X GiB of host memory; Y GiB available" when `bytes`
// exceeds the budget (or overflowed: negative). Requests up to 256 MiB pass unasked
// unless TILEFUSE_HOST_MEMORY_MB is set.
Status CheckHostMemory(int64_t bytes, const std::string& what);

// `elements` × `element_bytes` with overflow saturating to INT64_MAX.
int64_t SaturatingBytes(int64_t elements, int64_t element_bytes);

}  // namespace tilefuse
