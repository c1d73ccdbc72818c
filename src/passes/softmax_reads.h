// Whether a value is a softmax's probabilities, for the passes that leave attention's P·V as
// the attention matcher (fusion/attention_matcher.h) will look for it.
#pragma once

#include "tilefuse/graph.h"

namespace tilefuse {

// Is `value` a softmax's probabilities (exp(x) ÷ its row sum, through casts and the safe
// softmax's where(isnan(p), 0, p))?
bool ReadsSoftmax(const Graph& g, int value);

}  // namespace tilefuse
