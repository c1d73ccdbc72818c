#include "testing/random_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string_view>
#include <utility>

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
  std::vector<std::string_view> dtypes, off;
  for (DType d : o.dtypes) dtypes.push_back(DTypeName(d));
  const std::pair<bool, std::string_view> families[] = {
      {o.allow_matmul, "matmul"}, {o.allow_layer_patterns, "layer-patterns"}, {o.allow_dropout, "dropout"}, {o.allow_reductions, "reductions"},
      {o.allow_views, "views"},   {o.allow_broadcast, "broadcast"}, {o.allow_casts, "casts"},
      {o.allow_masks, "masks"},   {o.allow_multiple_outputs, "multiple-outputs"}};
  for (const auto& [allowed, name] : families)
    if (!allowed) off.push_back(name);
  return fmt::format("seed={} ops={}..{} dtypes={} max_rank={} max_elements={} max_inputs={} {}", o.seed, o.min_ops,
                     o.max_ops, fmt::join(dtypes, ","), o.max_rank, o.max_elements, o.max_inputs,
                     off.empty() ? std::string("all ops") : fmt::format("without {}", fmt::join(off, ",")));
}

StatusOr<Graph> GenerateRandomGraph(const RandomGraphOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  return random_graph_internal::RandomGraphGenerator(options).Generate();
}

}  // namespace tilefuse
