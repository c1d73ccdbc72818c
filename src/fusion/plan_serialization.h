// A fusion plan as text and back, for the compiled-model cache (api/model_cache.h). What comes
// back is checked only for its form; the caller verifies it against its graph (VerifyPlan).
#pragma once

#include <string>
#include <string_view>

#include "fusion/fusion_plan.h"
#include "tilefuse/status.h"

namespace tilefuse {

std::string SerializePlan(const FusionPlan& plan);
StatusOr<FusionPlan> DeserializePlan(std::string_view text);

}  // namespace tilefuse
