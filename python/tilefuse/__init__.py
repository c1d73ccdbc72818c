"""tilefuse: a fusion compiler for deep-learning graphs, from Python.

    import tilefuse
    model = tilefuse.compile("examples/mlp_block.onnxtxt")   # or an onnx.ModelProto
    outputs = model(x)                                       # NumPy in, NumPy out; torch in, torch out
    model.explain()                                          # the plan, as `tilefuse explain --json`
    tilefuse.bench("model.onnx", peers=["onnxruntime"])     # CPU medians, onnxruntime in the same process

    compiled = torch.compile(module, backend="tilefuse")     # PyTorch modules, through ONNX

The package wraps the same C++ library as the `tilefuse` command line tool (the extension
module tilefuse._tilefuse); errors are raised as tilefuse.Error with the CLI's message.
"""

import sys

from ._bench import bench
from ._errors import Error
from ._model import CompiledModel, Kernel, SpecializingModel, TensorSpec, compile

__all__ = ["CompiledModel", "Error", "Kernel", "SpecializingModel", "TensorSpec", "bench", "compile"]
__version__ = "0.1.0"

# torch.compile(backend="tilefuse") finds the backend through the package's entry point when
# tilefuse is installed; when it is only on PYTHONPATH, importing tilefuse after torch (or
# tilefuse.torch_backend) registers it. torch itself is never imported here: it is slow.
if "torch" in sys.modules:
    from . import torch_backend  # noqa: F401
