#include "testing/random_graph.h"

#include <fmt/format.h>

#include "testing/random_graph_generator.h"

namespace tilefuse {

namespace {
Status ValidateOptions(const RandomGraphOptions& o) {
  if (o.min_ops < 1 || o.min_ops > o.max_ops)
    return InvalidArgument(fmt::format("random graph ops {}..{}: need 1 <= min_ops <= max_ops", o.min_ops, o.max_ops));
  if (o.dtypes.empty()) return InvalidArgument("random graph: no dtypes to choose from");
  for (DType d : o.dtypes)
    if (!IsFloat(d)) return InvalidArgument(fmt::format("random graph dtype {} is not a float type", DTypeName(d)));
  if (o.max_rank < 0 || o.max_rank > 6) return InvalidArgument(fmt::format("random graph max_rank {} outside 0..6", o.max_rank));
  if (o.max_elements < 1) return InvalidArgument("random graph max_elements must be positive");
  if (o.max_inputs < 1) return InvalidArgument("random graph max_inputs must be positive");
  return Status::Ok();
}
}  // namespace

std::string DescribeRandomGraphOptions(const RandomGraphOptions& o) {
  std::string dtypes;
  for (DType d : o.dtypes) dtypes += (dtypes.empty() ? "" : ",") + std::string(DTypeName(d));
  std::string off;
  auto note = [&](bool allowed, const char* name) {
    if (!allowed) off += std::string(off.empty() ? " without " : ",") + name;
  };
  note(o.allow_matmul, "matmul");
  note(o.allow_dropout, "dropout");
  note(o.allow_reductions, "reductions");
  note(o.allow_views, "views");
  note(o.allow_broadcast, "broadcast");
  note(o.allow_casts, "casts");
  note(o.allow_masks, "masks");
  note(o.allow_multiple_outputs, "multiple-outputs");
  return fmt::format("seed={} ops={}..{} dtypes={} max_rank={} max_elements={} max_inputs={}{}", o.seed, o.min_ops,
                     o.max_ops, dtypes, o.max_rank, o.max_elements, o.max_inputs, off.empty() ? " all ops" : off);
}

StatusOr<Graph> GenerateRandomGraph(const RandomGraphOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  return random_graph_internal::RandomGraphGenerator(options).Generate();
}

}  // namespace tilefuse
