#include "fusion/fusion_plan.h"

namespace tilefuse {

std::string_view GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kPointwise: return "pointwise";
    case GroupKind::kRowReduction: return "row_reduction";
    case GroupKind::kReduction: return "reduction";
    case GroupKind::kGemm: return "gemm";
    case GroupKind::kAttention: return "attention";
    case GroupKind::kOpaque: return "opaque";
  }
  return "?";
}

}  // namespace tilefuse
