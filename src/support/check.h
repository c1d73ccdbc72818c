// TF_CHECK: for invariants that only a bug in tilefuse can break. Aborts with file and
// line. User errors must return a Status instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TF_CHECK(cond)                                                               \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "tilefuse internal error: %s:%d: check failed: %s\n",     \
                   __FILE__, __LINE__, #cond);                                       \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define TF_CHECK_MSG(cond, msg)                                                      \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "tilefuse internal error: %s:%d: check failed: %s (%s)\n",\
                   __FILE__, __LINE__, #cond, msg);                                  \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define TF_UNREACHABLE(msg) TF_CHECK_MSG(false, msg)
