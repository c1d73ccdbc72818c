// GraphRewriter: the one piece every pass shares. Passes rebuild graphs instead of
// mutating them; the rewriter walks the old graph in id order (which is topological)
// and keeps the map from each old node id to the Value that now stands for it, so a
// pass only says what to do with the nodes it cares about and copies the rest.
#pragma once

#include <vector>

#include "tilefuse/builder.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

class GraphRewriter {
 public:
  explicit GraphRewriter(const Graph& source);

  const Graph& source() const { return source_; }
  GraphBuilder& builder() { return builder_; }

  // The new Value standing for old node `old_id` (invalid until mapped).
  Value Map(int old_id) const { return map_.at(old_id); }
  bool IsMapped(int old_id) const { return map_.at(old_id).valid(); }
  void SetMap(int old_id, Value v) { map_.at(old_id) = v; }
  std::vector<Value> MapInputs(const Node& old) const;

  // Names the nodes created from now on after `old`; the first error the builder
  // records from then on is reported as old's (NodeLabel), by Finish.
  void SetLocation(const Node& old);
  // Copies `old` with its inputs remapped (re-inferring its type) and maps it.
  Value CopyNode(const Node& old);
  // Adds `old`'s replacement `value` with old's name and maps old to it.
  Value ReplaceWithConstant(const Node& old, Tensor value);

  // Adds the source graph's outputs (remapped) and builds and verifies the new graph.
  StatusOr<Graph> Finish();

 private:
  void NoteFailure();

  const Graph& source_;
  GraphBuilder builder_;
  std::vector<Value> map_;
  // The old node being rewritten, and the one that was when the builder first failed
  // (formatting a label for every node would cost more than the rest of a copy).
  const Node* location_ = nullptr;
  std::string failure_context_;
};

// Copies every node unchanged: the identity rewrite, and the base of passes that only
// touch a few nodes.
StatusOr<Graph> CopyGraph(const Graph& graph);

// How errors and dumps name a node: "%12 (add, 'Add_3')".
std::string NodeLabel(const Node& node);

}  // namespace tilefuse
