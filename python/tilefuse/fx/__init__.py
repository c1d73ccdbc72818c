"""tilefuse.fx: PyTorch FX graphs of ATen ops straight into tilefuse's IR.

`translate(gm, args, weights)` builds a tilefuse graph from an ATen-level GraphModule (what
AOTAutograd hands a backend) for one call's arguments; the op families are mapped one module
each (pointwise, views, reductions, linalg, nn, attention, creation, scans), every mapped overload
listed in `HANDLERS`. `folded_weights(gm, weights)` says which weights become constants (the
others stay inputs). `unsupported_nodes(gm)` lists what has no mapping, so a caller can run
those nodes in PyTorch and the rest through tilefuse. The torch.compile backend
(tilefuse.torch_backend) is the user-facing entry.
"""

from . import attention, attention_backward, creation, linalg, nn, pointwise, reductions, scans, views  # noqa: F401  (register handlers)
from . import linear_cross_entropy, whole_attention  # noqa: F401  (register the tilefuse::linear_cross_entropy and ::attention ops)
from ._context import HANDLERS, Unsupported
from .translator import (Translation, attribute, is_supported, storage_order, target_name, translate, unsupported_nodes,
                         why_unsupported)
from .weights import folded_weights

__all__ = ["HANDLERS", "Translation", "Unsupported", "attribute", "folded_weights", "is_supported", "storage_order", "target_name",
           "translate", "unsupported_nodes", "why_unsupported"]
