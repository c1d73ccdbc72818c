"""RepeatCall, the fast path of a compiled graph's calls whose arguments stayed put but a few: what
it sends the runtime, when it gives the call back to the general path, and how arguments settle.
The model is a stand-in (the path runs on GPUs only; the GPU decode tests run it end to end)."""
import pytest

torch = pytest.importorskip("torch")

from tilefuse import _model, _tilefuse  # noqa: E402
from tilefuse._repeat_call import RepeatCall  # noqa: E402


class Runs:
    """HeldDevicePointers' stand-in: records each run's entries and pointers and applies them."""

    def __init__(self, inputs, outputs):
        self.inputs, self.outputs, self.runs = list(inputs), list(outputs), []

    def run(self, model, entries, pointers, stream):
        self.runs.append(dict(zip(entries, pointers)))
        for e, p in zip(entries, pointers):
            if e < len(self.inputs):
                self.inputs[e] = p
            else:
                self.outputs[e - len(self.inputs)] = p


class Module:
    HeldDevicePointers = Runs


class Model:
    """A compiled model's stand-in after a call through the general path: graph inputs
    (weight, weight, token, cache), outputs (logits, the cache's new value written in place)."""

    def __init__(self, args, moving):
        self._held_pointers = _model._HeldPointers(torch)
        self._held_pointers.note([a.data_ptr() for a in args])
        self._held_pointers._moving = list(moving)
        self._held_pointers._steady = [n for n in range(len(args)) if n not in moving]
        self._device_outputs = [("f32", (1, 8)), ("f32", (4, 4))]
        self._graph = object()
        self.allocated = []

    def _empty_outputs(self, only=None):
        outputs = [torch.empty(8) for _ in only]
        self.allocated.append(outputs)
        return outputs

    def _current_stream(self):
        return 7


def make(moving=(2,)):
    args = [torch.randn(4, 4), torch.randn(4), torch.tensor([[3]]), torch.zeros(4, 4)]
    model = Model(args, list(moving))
    into = _model.InPlaceOutputs([(1, 3)], 4, 2)  # output 1 is input 3's memory
    call = RepeatCall(torch, model, [0, 1, 2, 3], into, lambda tensors, args: tensors[:1], 1, Module)
    return call, model, args


def test_sends_only_the_moved_pointers_and_the_fresh_outputs():
    call, model, args = make()
    token = torch.tensor([[5]])
    outputs = call([args[0], args[1], token, args[3]])
    assert len(outputs) == 1 and outputs[0] is model.allocated[-1][0]
    assert call._held.runs == [{2: token.data_ptr(), 4: outputs[0].data_ptr()}]
    # The pointers it holds are the call's: inputs, then the cache's output at the cache's memory.
    assert call._held.inputs == [args[0].data_ptr(), args[1].data_ptr(), token.data_ptr(), args[3].data_ptr()]
    assert call._held.outputs == [outputs[0].data_ptr(), args[3].data_ptr()]


def test_a_steady_argument_that_moved_gives_the_call_back():
    call, model, args = make()
    assert call([torch.randn(4, 4), args[1], torch.tensor([[5]]), args[3]]) is None
    assert call._held.runs == [] and model.allocated == []


def test_a_moving_input_updated_in_place_moves_its_output_too():
    call, model, args = make(moving=(2, 3))
    cache = torch.zeros(4, 4)
    outputs = call([args[0], args[1], args[2], cache])
    assert call._held.runs[-1] == {2: args[2].data_ptr(), 3: cache.data_ptr(), 5: cache.data_ptr(),
                                   4: outputs[0].data_ptr()}


def test_a_moving_argument_not_dense_gives_the_call_back():
    call, model, args = make(moving=(2, 3))
    strided = torch.zeros(4, 8)[:, ::2]
    assert call([args[0], args[1], args[2], strided]) is None


def test_moving_arguments_that_stay_put_become_steady():
    call, model, args = make(moving=(2, 3))
    tokens = [torch.tensor([[step]]) for step in range(RepeatCall.kSettle + 1)]  # alive: each at its own address
    for token in tokens[:-1]:
        call([args[0], args[1], token, args[3]])  # a new token each call, the cache kept
    assert call._moving == [2]
    call([args[0], args[1], tokens[-1], args[3]])
    assert sorted(call._held.runs[-1]) == [2, 4]  # the token and the logits only
    # Now checked as steady: another cache gives the call back.
    assert call([args[0], args[1], args[2], torch.zeros(4, 4)]) is None


def test_held_device_pointers_checks_its_entries():
    import tilefuse
    from conftest import EXAMPLES

    model = tilefuse.compile(EXAMPLES[0], backend="cpu")._graph
    inputs, outputs = len(model.inputs), len(model.outputs)
    held = _tilefuse.HeldDevicePointers([256 * (i + 1) for i in range(inputs)], [0] * outputs)
    with pytest.raises(IndexError, match="entry"):
        held.run(model, [inputs + outputs], [512], 0)
    with pytest.raises(ValueError, match="1 entries and 2 pointers"):
        held.run(model, [0], [512, 768], 0)
    # The entries are set before the run, which a model on the CPU refuses.
    with pytest.raises(tilefuse.Error, match="CUDA graph|device"):
        held.run(model, [0, inputs], [4096, 8192], 0)
    assert held.inputs[0] == 4096 and held.outputs[0] == 8192
