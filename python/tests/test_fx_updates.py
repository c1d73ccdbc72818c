"""An inference graph's updates of its inputs (AOTAutograd's copy_ into a placeholder at the
graph's end, kept by keep_inference_input_mutations): taken as outputs of tilefuse's graph that
the call leaves in their arguments, and refused, with the reason, where the copy is not at the
end (the input read after it) or its destination is not an input."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from tilefuse.fx import translate  # noqa: E402
from tilefuse.fx.translator import why_unsupported  # noqa: E402

aten = torch.ops.aten


def _graph(read_after=False, into_a_value=False):
    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    total = g.call_function(aten.add.Tensor, (x, y))
    destination = g.call_function(aten.mul.Tensor, (x, 2.0)) if into_a_value else x
    update = g.call_function(aten.copy_.default, (destination, total))
    result = g.call_function(aten.mul.Tensor, (x if read_after else total, 3.0))
    g.output((result,))
    return torch.fx.GraphModule({}, g), update


def _args():
    return [torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)]


def test_an_update_at_the_end_is_an_output_of_its_own():
    _, update = _graph()
    assert why_unsupported(update) is None
    # As AOTAutograd writes it: functionalized, the mutation a copy_ at the end.
    from torch.fx.experimental.proxy_tensor import make_fx

    def bump(x, y):
        x.add_(y)
        return x * 3

    gm = make_fx(torch.func.functionalize(bump, remove="mutations_and_views"))(*_args())
    updates = [n for n in gm.graph.nodes if n.target is aten.copy_.default]
    assert len(updates) == 1 and why_unsupported(updates[0]) is None, gm.graph
    translation = translate(gm, _args(), set())
    assert translation.mutations == [(1, 0)], "the graph's one output, then x's new value"


def test_an_input_read_after_its_update_is_refused():
    gm, update = _graph(read_after=True)
    assert why_unsupported(update) == "copy_ into an input read after the copy"


def test_an_update_of_a_computed_value_is_refused():
    gm, update = _graph(into_a_value=True)
    assert "other than a graph input" in why_unsupported(update)


def test_the_update_s_value_reaches_its_argument_through_the_backend():
    def bump(x, y):
        x.add_(y)
        return x * 3

    compiled = torch.compile(bump, backend="tilefuse", options={"backend": "cpu"}, fullgraph=True)
    with torch.no_grad():
        ours, theirs = _args(), _args()
        torch.testing.assert_close(compiled(*ours), bump(*theirs))
        torch.testing.assert_close(ours[0], theirs[0], rtol=0, atol=0)
