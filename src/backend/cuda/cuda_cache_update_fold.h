// A KV cache's update at one position, folded into the decode attention that reads it.
//
// A static KV cache's decode step writes the new key and value at the step's position
// (transformers' `index_copy_`, functionalized: where(key == position, new row, cache), a
// pointwise group of its own, written in place where the runtime may) and then attends over
// the updated caches. That group is a launch and a dependency edge on the step's critical path
// (GPT-2's step: 11 launches of ~2.4 us each on an H200, 2026-12-05). Folded, the attention's
// decode form reads the caches as they were with the position's key taken from the new rows,
// and writes those rows into the updated caches itself (attention_decode.cuh's kUpdates); the
// update's group keeps no kernel (grouped_into the attention) and its outputs are written at the
// attention's step.
//
// Taken where the attention runs in the decode form and its K and V are exactly the outputs
// of one generated pointwise group, each stored as
//   updated[e] = where(key(e) == position[0], rows[f(e)], cache[e])
// with `cache` a graph input of the updated value's shape, key(e) = (e / stride) % keys over
// the attention's keys, `position` one integer and f reading the same row for every key;
// the updated caches read by nothing but the attention (and returned).
#pragma once

#include "backend/cuda/cuda_program.h"
#include "codegen/attention_template.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// Whether some generated pointwise group's outputs are all read by attention group
// `attention_group` (a candidate update): the cheap test before the attention is lowered again.
bool MayFoldCacheUpdate(const FusionPlan& plan, const CudaProgram& program, int attention_group);

// Folds the update into `attention` (its K and V then read the caches, its cache_update set)
// and returns the update's group, or -1 where it does not apply (`attention` unchanged).
int FoldCacheUpdate(const Graph& g, const FusionPlan& plan, const CudaProgram& program, int attention_group,
                    AttentionTemplateKernel& attention);

}  // namespace tilefuse
