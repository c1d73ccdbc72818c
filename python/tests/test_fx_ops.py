"""Every ATen overload tilefuse.fx maps, through torch.compile(backend="tilefuse") on the CPU,
against eager PyTorch on seeded random inputs.

Each test compiles a small function written the way users write PyTorch, checks that
tilefuse compiled the graph (its INFO line) and that nothing ran in PyTorch instead (no
WARNING naming PyTorch), and compares every output with eager's: dtype, shape and values
(f32 within 1e-5; bf16 and f16 within a tolerance relative to the output's scale). Outputs
are returned as dicts so that a mismatch names the op.

The handlers are wrapped for the module so each test records the overloads its graphs reached;
test_every_handler_is_exercised (last) fails when an overload in tilefuse.fx.HANDLERS is reached
by no passing test and is not listed as unreachable, so a new handler needs a test here.
"""

import functools
import logging
import math
import os
import zlib

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from tilefuse.fx import HANDLERS  # noqa: E402

COMPILED = "compiled a torch.compile graph"
IN_PYTORCH = "in PyTorch"

# Bound on |tilefuse - eager|: rtol, and atol relative to the output's largest magnitude
# (f32 and f64 absolute, as the other torch.compile tests).
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}

# Overloads no user-level PyTorch code hands a torch.compile backend (on a CPU-only machine),
# each with the reason; the meta test checks that none of them is reached after all.
UNREACHABLE = {
    # Decomposed by AOTAutograd (core ATen's decomposition table, tilefuse_backend's
    # _decompositions()) before the backend sees the graph.
    "aten._unsafe_view.default": "decomposed to aten.view",
    "aten.alias_copy.default": "decomposed to aten.alias",
    "aten.all.default": "decomposed to logical_not + any",
    "aten.all.dim": "decomposed to logical_not + any",
    "aten.all.dims": "decomposed to logical_not + any",
    "aten.arange.default": "decomposed to arange.start_step",
    "aten.arange.start": "decomposed to arange.start_step",
    "aten.baddbmm.default": "decomposed to bmm, mul, add",
    "aten.clamp_max.Tensor": "decomposed to clamp.Tensor",
    "aten.clamp_max.default": "decomposed to clamp",
    "aten.clamp_min.Tensor": "decomposed to clamp.Tensor",
    "aten.clamp_min.default": "decomposed to clamp",
    "aten.detach.default": "decomposed to aten.alias",
    "aten.dot.default": "decomposed to mul + sum",
    "aten.expand_copy.default": "decomposed to expand + clone",
    "aten.hardsigmoid.default": "decomposed to add, clamp, div",
    "aten.hardswish.default": "decomposed to add, clamp, mul, div",
    "aten.new_full.default": "decomposed to aten.full",
    "aten.new_ones.default": "decomposed to aten.full",
    "aten.new_zeros.default": "decomposed to aten.full",
    "aten.ones.default": "decomposed to aten.full",
    "aten.ones_like.default": "decomposed to aten.full_like",
    "aten.zeros.default": "decomposed to aten.full",
    "aten.zeros_like.default": "decomposed to aten.full_like",
    "aten.rsub.Scalar": "decomposed to aten.sub",
    "aten.rsub.Tensor": "decomposed to aten.sub",
    "aten.silu.default": "decomposed to sigmoid + mul",
    "aten.softplus.default": "decomposed to exp, log1p, where",
    "aten.split.Tensor": "decomposed to split_with_sizes",
    "aten.split_with_sizes_copy.default": "decomposed to split_with_sizes + clone",
    "aten.squeeze.default": "decomposed to squeeze.dims",
    "aten.squeeze.dim": "decomposed to squeeze.dims",
    "aten.squeeze_copy.dim": "decomposed to squeeze.dims + clone",
    "aten.squeeze_copy.dims": "decomposed to squeeze.dims + clone",
    "aten.stack.default": "decomposed to unsqueeze/view + cat",
    "aten.sum.default": "decomposed to sum.dim_IntList",
    "aten.t.default": "decomposed to aten.permute",
    "aten.transpose.int": "decomposed to aten.permute",
    "aten.unbind.int": "decomposed to split_with_sizes + squeeze",
    "aten.unsqueeze_copy.default": "decomposed to unsqueeze + clone",
    # CompositeImplicitAutograd: PyTorch's dispatcher expands these before any tracing mode
    # sees them (the table above lists their pieces).
    "aten.adaptive_avg_pool1d.default": "CompositeImplicit: unsqueeze + _adaptive_avg_pool2d",
    "aten.adaptive_avg_pool2d.default": "CompositeImplicit: _adaptive_avg_pool2d",
    "aten.avg_pool1d.default": "CompositeImplicit: unsqueeze + avg_pool2d",
    "aten.contiguous.default": "CompositeImplicit: clone (or nothing)",
    "aten.log_softmax.int": "CompositeImplicit: _log_softmax",
    "aten.matmul.default": "CompositeImplicit: mm/bmm with views",
    "aten.max_pool1d.default": "CompositeImplicit: unsqueeze + max_pool2d_with_indices",
    "aten.max_pool2d.default": "CompositeImplicit: max_pool2d_with_indices",
    "aten.reshape.default": "CompositeImplicit: view (or clone + view)",
    "aten.scaled_dot_product_attention.default": "CompositeImplicit: the CPU flash kernel or the math path",
    "aten.softmax.int": "CompositeImplicit: _softmax",
    "aten.var.dim": "CompositeImplicit: var.correction",
    "aten.var_mean.dim": "CompositeImplicit: var_mean.correction",
    "aten.where.Scalar": "CompositeImplicit: scalar_tensor + where.self",
    "aten.where.ScalarOther": "CompositeImplicit: scalar_tensor + where.self",
    "aten.where.ScalarSelf": "CompositeImplicit: scalar_tensor + where.self",
    # The dispatcher picks these attention kernels for CUDA tensors only; CPU tensors get
    # _scaled_dot_product_flash_attention_for_cpu (or the math path).
    "aten._scaled_dot_product_flash_attention.default": "CUDA tensors only",
    "aten._scaled_dot_product_efficient_attention.default": "CUDA tensors only",
    "aten._scaled_dot_product_cudnn_attention.default": "CUDA tensors only",
    # Their backward ops likewise (test_cuda.py runs them on a GPU; test_torch_attention_backward.py
    # checks which calls the attention backward template takes).
    "aten._scaled_dot_product_flash_attention_backward.default": "CUDA tensors only",
    "aten._scaled_dot_product_cudnn_attention_backward.default": "CUDA tensors only",
    # Python numbers reach ATen graphs as div.Tensor's second argument (x / 2, torch.div(x, 2,
    # rounding_mode=...)); no decomposition or composite op this PyTorch has calls the
    # Scalar overloads of div (add, sub and mul's are reached below).
    "aten.div.Scalar": "no user-level call produces it (x / 2 is div.Tensor)",
    "aten.div.Scalar_mode": "no user-level call produces it (x // 2 is div.Tensor_mode)",
}

# ---- recording which overloads the graphs reached

REACHED = set()   # overloads translated during the current test
VERIFIED = set()  # overloads of graphs tilefuse compiled and that matched eager


def _recording(name, handler):
    @functools.wraps(handler)  # keeps what the translator reads off a handler (accepts)
    def record(ctx, *args, **kwargs):
        REACHED.add(name)
        return handler(ctx, *args, **kwargs)
    return record


@pytest.fixture(scope="module", autouse=True)
def recorded_handlers():
    with pytest.MonkeyPatch.context() as patch:
        for name, handler in list(HANDLERS.items()):
            patch.setitem(HANDLERS, name, _recording(name, handler))
        yield


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    REACHED.clear()
    yield
    torch._dynamo.reset()


@pytest.fixture
def gen(request):
    """A generator seeded from the test's name: fresh inputs per test, the same every run
    ($TILEFUSE_TEST_SEED, where set, is mixed in: other inputs, to look for flaky tolerances)."""
    seed = zlib.crc32((request.node.nodeid + os.environ.get("TILEFUSE_TEST_SEED", "")).encode())
    return torch.Generator().manual_seed(seed)


def uniform(gen, *shape, low=-2.0, high=2.0, dtype=torch.float32):
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low).to(dtype)


def integers(gen, *shape, low=-9, high=10, dtype=torch.int64):
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)


def signs(gen, *shape):
    return torch.randint(0, 2, shape, generator=gen) * 2 - 1


def halves(gen, *shape, low=-3, high=4):
    """Floats on a grid of 0.5 (ties, zeros, exact equality for comparisons and logic)."""
    return integers(gen, *shape, low=2 * low, high=2 * high).float() / 2


def randomize(module, gen):
    """Random parameters and buffers (running variances positive): nothing a zero or a one."""
    with torch.no_grad():
        for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
            if tensor.is_floating_point():
                low = 0.5 if name.endswith("running_var") else -1.0
                tensor.copy_(uniform(gen, *tensor.shape, low=low, high=1.5, dtype=tensor.dtype))
    return module.eval()


@pytest.fixture
def check(caplog):
    """check(fn, *inputs, tolerance=None, more_calls=()): fn through tilefuse (CPU) matches fn in
    eager PyTorch, on `inputs` and on each tuple of inputs in more_calls (the same compiled
    function: other shapes make Dynamo trace it with symbolic sizes); tolerance, where given, is
    an rtol (atol the same times the output's scale for the half types) or an (rtol, atol) pair."""
    caplog.set_level(logging.INFO, logger="tilefuse")

    def run(fn, *inputs, tolerance=None, more_calls=()):
        compiled = torch.compile(fn, backend="tilefuse", options={"backend": "cpu"}, fullgraph=True)
        results = []
        with torch.no_grad():
            for call in [inputs, *more_calls]:
                results.append((compiled(*call), fn(*call)))
        records = [r for r in caplog.records if r.name == "tilefuse"]
        assert any(COMPILED in r.getMessage() for r in records), "tilefuse compiled nothing:\n" + caplog.text
        in_pytorch = [r.getMessage() for r in records if r.levelno >= logging.WARNING and IN_PYTORCH in r.getMessage()]
        assert not in_pytorch, "\n".join(in_pytorch)
        for actual, expected in results:
            assert_matches(actual, expected, tolerance)
        VERIFIED.update(REACHED)
        return results[0][0]

    return run


def assert_matches(actual, expected, tolerance=None):
    got, got_spec = torch.utils._pytree.tree_flatten(actual)
    want, want_spec = torch.utils._pytree.tree_flatten(expected)
    assert got_spec == want_spec, f"{got_spec} != {want_spec}"
    paths = [torch.utils._pytree.keystr(p) for p, _ in torch.utils._pytree.tree_flatten_with_path(expected)[0]]
    for path, a, e in zip(paths, got, want):
        assert isinstance(a, torch.Tensor), f"{path}: {type(a).__name__}"
        if e.is_floating_point():
            if isinstance(tolerance, tuple):
                rtol, atol = tolerance
            else:
                rtol = tolerance if tolerance is not None else TOLERANCE[e.dtype]
                scale = e.abs().max().item() if e.numel() and e.dtype in (torch.float16, torch.bfloat16) else 1.0
                atol = rtol * scale
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, msg=lambda m: f"{path}: {m}")
        else:
            torch.testing.assert_close(a, e, rtol=0, atol=0, msg=lambda m: f"{path}: {m}")


FLOATS = [torch.float32, torch.bfloat16, torch.float16]


# ---- pointwise

def unary_ops(x, p):  # p > 0
    return {"neg": torch.neg(x), "abs": torch.abs(x), "exp": torch.exp(x), "log": torch.log(p), "sqrt": torch.sqrt(p),
            "rsqrt": torch.rsqrt(p), "reciprocal": torch.reciprocal(x), "tanh": torch.tanh(x),
            "sigmoid": torch.sigmoid(x), "erf": torch.erf(x), "sin": torch.sin(x), "cos": torch.cos(x),
            "relu": torch.relu(x), "floor": torch.floor(x), "ceil": torch.ceil(x), "sign": torch.sign(x),
            "log1p": torch.log1p(p), "expm1": torch.expm1(x), "exp2": torch.exp2(x), "log2": torch.log2(p)}


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_math(check, gen, dtype):
    check(unary_ops, uniform(gen, 3, 16, low=-3, high=3, dtype=dtype),
          uniform(gen, 3, 16, low=0.1, high=4, dtype=dtype))


def inverse_trig(x, y):  # |x| < 1
    return {"asin": torch.asin(x), "acos": torch.acos(x), "atan": torch.atan(y * 10), "atan2": torch.atan2(x, y)}


@pytest.mark.parametrize("dtype", FLOATS)
def test_inverse_trig(check, gen, dtype):
    check(inverse_trig, uniform(gen, 3, 16, low=-0.99, high=0.99, dtype=dtype), uniform(gen, 3, 16, low=-3, high=3, dtype=dtype))


def test_inverse_trig_edges(check):
    # atan2 in every quadrant and on the axes, signed zeros (atan2(0, -0) is pi, atan2(-0, -1)
    # is -pi), infinities; asin and acos at +-1; NaN outside [-1, 1] and from a NaN, as PyTorch
    # (compared as masks: assert_close fails NaN against NaN).
    inf, nan = math.inf, math.nan
    y = torch.tensor([0.0, 0.0, -0.0, -0.0, 1.0, 1.0, -1.0, -1.0, 0.0, inf, inf, -inf, 2.0, 1e-30, 3.0])
    x = torch.tensor([0.0, -0.0, 0.0, -1.0, 1.0, -1.0, 1.0, -1.0, 5.0, inf, -inf, 1.0, -inf, -1.0, 1e30])
    s = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0, -0.0, 1e-20, 0.9999, -0.9999, 0.25])
    wild = torch.tensor([1.5, -2.0, nan, inf, 1.0, 0.5])
    big = torch.tensor([inf, -inf, 3e38, -3e38])
    check(lambda y, x, s, wild, big: {"atan2": torch.atan2(y, x), "asin": torch.asin(s), "acos": torch.acos(s), "atan": torch.atan(s * 1e30),
                                      "atan_inf": torch.atan(big), "asin_nan": torch.isnan(torch.asin(wild)),
                                      "acos_nan": torch.isnan(torch.acos(wild)), "atan2_nan": torch.isnan(torch.atan2(wild, wild))},
          y, x, s, wild, big, tolerance=(1e-6, 1e-37))


def test_log1p_and_expm1_keep_the_digits_of_small_arguments(check, gen):
    # What log1p and expm1 are for: log(1 + x) and exp(x) - 1 lose x's digits when |x| << 1
    # (log1p(1e-7) came out 1.19e-7). Relative error only, small and large arguments, the edges.
    x = torch.cat([uniform(gen, 64, low=1e-7, high=1e-3) * signs(gen, 64), uniform(gen, 64, low=-20, high=20),
                   torch.tensor([-1.0, math.inf, -math.inf, 100.0, 1e30, -0.999, 1e-30])])
    check(lambda x: {"log1p": torch.log1p(x.clamp(min=-1.0)), "expm1": torch.expm1(x),
                     "log1p_f64": torch.log1p(x.double().clamp(min=-1.0)), "expm1_f64": torch.expm1(x.double()),
                     "softplus": F.softplus(x), "log_sigmoid": F.logsigmoid(x)}, x, tolerance=(2e-6, 1e-37))


def activations(x):
    return {"gelu": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh"), "silu": F.silu(x),
            "hardtanh": F.hardtanh(x, -0.5, 1.5), "relu6": F.relu6(x * 4), "leaky_relu": F.leaky_relu(x, 0.1),
            "elu": F.elu(x), "elu_alpha": F.elu(x, alpha=0.5), "selu": F.selu(x), "celu": F.celu(x, alpha=2.0),
            "hardsigmoid": F.hardsigmoid(x), "hardswish": F.hardswish(x), "softplus": F.softplus(x),
            "softplus_beta": F.softplus(x, beta=2.0, threshold=1.0), "mish": F.mish(x), "relu": F.relu(x)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activations(check, gen, dtype):
    check(activations, uniform(gen, 4, 16, low=-4, high=4, dtype=dtype))


def binary_ops(a, b, p):  # a [3, 1, 8] broadcast with b, p [4, 8]; p > 0
    return {"add": torch.add(a, b), "add_alpha": torch.add(a, b, alpha=2.5), "add_number": a + 1.5,
            "sub": torch.sub(a, b), "sub_alpha": torch.sub(a, b, alpha=0.5), "rsub": 2 - a, "mul": a * b,
            "mul_number": a * 3, "div": a / p, "div_number": a / 4, "maximum": torch.maximum(a, b),
            "minimum": torch.minimum(a, b), "pow": p ** b, "pow_number": p ** 2.5, "square": a ** 2,
            "number_pow": 2 ** a}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_binary_arithmetic(check, gen, dtype):
    check(binary_ops, uniform(gen, 3, 1, 8, dtype=dtype), uniform(gen, 4, 8, dtype=dtype),
          uniform(gen, 4, 8, low=0.5, high=2.0, dtype=dtype))


def test_remainder_fmod_and_floor_division_of_floats(check, gen):
    # remainder has the divisor's sign (Python's %), fmod the dividend's (C's); floor division
    # rounds toward -inf, trunc toward zero.
    def rounding(a, b):
        return {"remainder": torch.remainder(a, b), "remainder_number": a % 1.5, "fmod": torch.fmod(a, b),
                "fmod_number": torch.fmod(a, -1.5), "floordiv": a // b, "floordiv_number": a // 0.75,
                "trunc": torch.div(a, b, rounding_mode="trunc"), "floor": torch.div(a, b, rounding_mode="floor")}

    check(rounding, uniform(gen, 4, 8, low=-5, high=5), uniform(gen, 4, 8, low=0.5, high=2) * signs(gen, 4, 8))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_floor_division_where_the_quotient_rounds_to_an_integer(check, gen, dtype):
    # a = k·b rounded: a / b lands within an ulp of the integer k, on either side, and rounds
    # onto it; PyTorch's floor division still gives k - 1 when the exact quotient is below k
    # (1 // 0.1 is 9.0), trunc rounds the quotient to the dtype first. Exact results.
    b = uniform(gen, 256, low=0.01, high=3, dtype=dtype) * signs(gen, 256).to(dtype)
    a = (integers(gen, 256, low=-50, high=51).to(dtype) * b)
    check(lambda a, b: {"floordiv": a // b, "floor_divide": torch.floor_divide(a, b), "floordiv_number": a // 0.1,
                        "trunc": torch.div(a, b, rounding_mode="trunc"),
                        "trunc_number": torch.div(a, 0.3, rounding_mode="trunc"), "remainder": a % b,
                        "remainder_number": a % 0.1}, a, b, tolerance=(0, 0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_python_numbers_with_half_tensors_round_as_in_pytorch(check, gen, dtype):
    # PyTorch multiplies and divides a half tensor by a number kept in f32 (x * 0.1 is by 0.1f),
    # and rounds the number to the dtype for the other ops. Exact results.
    def numbers(x, y):
        return {"mul": x * 0.1, "div": x / 0.3, "add": x + 0.1, "sub": x - 0.7, "rsub": 0.3 - x,
                "fmod": torch.fmod(x, 0.3),
                "remainder": x % 0.3, "maximum": torch.maximum(x, y), "mul_tensors": x * y, "div_tensors": x / y,
                "where": torch.where(x > 0.1, x, 0.1), "clamp": x.clamp(-0.1, 0.3)}

    check(numbers, uniform(gen, 512, low=-4, high=4, dtype=dtype), uniform(gen, 512, low=0.5, high=4, dtype=dtype),
          tolerance=(0, 0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_arithmetic(check, gen, dtype):
    def integer_ops(i, j):  # j nonzero, either sign
        return {"add": i + j, "sub": i - 3, "mul": i * j, "mul_number": i * 2, "floordiv": i // j,
                "floordiv_number": i // 3, "trunc": torch.div(i, j, rounding_mode="trunc"), "truediv": i / j,
                "remainder": i % j, "remainder_number": i % 3, "fmod": torch.fmod(i, j), "neg": -i, "abs": torch.abs(i),
                "maximum": torch.maximum(i, j), "minimum": torch.minimum(i, j), "square": i ** 2, "sign": torch.sign(i),
                "relu": torch.relu(i), "clamp": torch.clamp(i, -5, 5), "float_scale": i * 0.5, "add_alpha":
                torch.add(i, j, alpha=3)}

    check(integer_ops, integers(gen, 4, 8, low=-20, high=21, dtype=dtype),
          (integers(gen, 4, 8, low=1, high=7) * signs(gen, 4, 8)).to(dtype))


def test_comparisons(check, gen):
    def comparisons(x, y, i):
        return {"eq": x == y, "eq_number": x == 0.5, "ne": x != y, "ne_number": x != 0.5, "lt": x < y,
                "lt_number": x < 0.5, "le": x <= y, "le_number": x <= 0.5, "gt": x > y, "gt_number": x > 0.5,
                "ge": x >= y, "ge_number": x >= 0.5, "int_eq": i == 2, "int_lt_float": i < x,
                "int_ge_fraction": i >= 1.5, "int_ne_fraction": i != 1.5, "bf16_gt_f32": x.bfloat16() > y}

    check(comparisons, halves(gen, 4, 8), halves(gen, 4, 8), integers(gen, 4, 8, low=-3, high=4))


def test_logical_and_bitwise_ops(check, gen):
    def logic(a, b, x, y):
        return {"and": a & b, "or": a | b, "xor": a ^ b, "invert": ~a, "logical_and": torch.logical_and(a, b),
                "logical_or_floats": torch.logical_or(x, b), "logical_xor_floats": torch.logical_xor(x, y),
                "logical_not_float": torch.logical_not(x), "logical_not": torch.logical_not(a),
                "logical_and_ints": torch.logical_and(x.long(), y)}

    check(logic, uniform(gen, 4, 8) > 0, uniform(gen, 4, 8) > 0, halves(gen, 4, 8, low=-1, high=2),
          halves(gen, 4, 8, low=-1, high=2))


def test_isnan_isinf(check, gen):
    x = uniform(gen, 4, 8)
    x[0, 1], x[1, 2], x[2, 3], x[3, 4] = math.nan, math.inf, -math.inf, math.nan
    check(lambda x: {"isnan": torch.isnan(x), "isinf": torch.isinf(x), "finite": torch.isfinite(x),
                     "cleaned": torch.where(torch.isnan(x) | torch.isinf(x), -1.0, x) * 2}, x)


def test_where_and_clamp(check, gen):
    def where_clamp(c, x, y, i, lo, hi):
        return {"where": torch.where(c, x, y), "where_number_other": torch.where(c, x, 0.5),
                "where_number_self": torch.where(c, -1.0, y), "where_numbers": torch.where(x > 0, 1.0, 0.0),
                "where_int_float": torch.where(c, i, y), "clamp": torch.clamp(x, -0.5, 0.5),
                "clamp_min": torch.clamp(x, min=0.2), "clamp_max": torch.clamp(x, max=-0.2),
                "clamp_tensors": torch.clamp(x, lo, hi), "clamp_min_tensor": torch.clamp(x, min=lo),
                "clamp_max_tensor": torch.clamp_max(x, hi), "clamp_min_method": x.clamp_min(0.1),
                "clip": torch.clip(x, -1, 1), "clamp_int_float": torch.clamp(i, min=-2.5),
                "where_int_numbers": torch.where(c, 1, 0), "clamp_crossed": torch.clamp(x, 0.5, -0.5)}

    check(where_clamp, uniform(gen, 4, 8) > 0, uniform(gen, 4, 8), uniform(gen, 4, 8),
          integers(gen, 4, 8, low=-5, high=6), uniform(gen, 8, low=-1.0, high=-0.1), uniform(gen, 8, low=0.1, high=1))


def test_casts(check, gen):
    def casts(x, i, b, h):
        return {"f16": x.half(), "bf16": x.bfloat16(), "f64": x.double(), "i32": x.int(), "i64": x.long(),
                "i8": (x * 10).to(torch.int8), "u8": (x.abs() * 20).to(torch.uint8), "bool": x.bool(),
                "int_to_float": i.float(), "int_to_i32": i.int(), "int_to_bool": i.bool(), "bool_to_float": b.float(),
                "bool_to_long": b.long(), "bf16_to_float": h.float(), "bf16_to_f16": h.half(),
                "to_dtype_of": x.to(i.dtype), "type_as": i.type_as(x)}

    check(casts, halves(gen, 4, 8) + uniform(gen, 4, 8, low=-0.4, high=0.4), integers(gen, 4, 8),
          uniform(gen, 4, 8) > 0, uniform(gen, 4, 8, dtype=torch.bfloat16))


def test_clones_aliases_constants_and_copies(check, gen):
    def copies(x, y, i):
        z = x * 2
        z.copy_(y)  # functionalized into aten.copy
        w = x * 3
        w.copy_(i)  # broadcast and cast: aten.copy of a [4] int64 into [3, 4] f32
        return {"copy": z + 1, "clone": x.clone() * 3, "detach": x.detach() * 2, "contiguous": x.t().contiguous(),
                "constant": x + torch.tensor([1.0, -2.0, 3.0, 0.5]), "copy_cast_broadcast": w + 1,
                "alias_copy": torch.alias_copy(x) + 1, "detach_copy": torch.detach_copy(x * 2)}

    check(copies, uniform(gen, 3, 4), uniform(gen, 4), integers(gen, 4))


# ---- views, layout and indexing

def test_views(check, gen):
    def views(x):  # [2, 3, 4]; views of an intermediate, so the graph holds them
        y = x * 2
        return {"view": y.view(6, 4) + 1, "reshape": y.reshape(-1, 2) + 1, "permute": y.permute(2, 0, 1) + 1,
                "transpose": y.transpose(0, 2) + 1, "mT": y.mT + 1, "unsqueeze": y.unsqueeze(1) + 1,
                "unsqueeze_last": y.unsqueeze(-1) + 1, "squeeze_dim": y[:, None].squeeze(1) + 1,
                "squeeze_all": y[:1, :, None].squeeze() + 1, "squeeze_not_one": y.squeeze(1) + 1,
                "flatten": y.flatten(1) + 1, "unflatten": y.unflatten(2, (2, 2)) + 1,
                "expand": y[:1].expand(3, 3, 4) + 1, "expand_keep": y[:, :1].expand(-1, 5, -1) + 1,
                "expand_new_dims": y[0, 0].expand(2, 3, 4) + 1, "t": y[0].t() + 1, "movedim": y.movedim(0, -1) + 1}

    check(views, uniform(gen, 2, 3, 4))


def test_copying_view_functions(check, gen):
    def view_copies(x):
        y = x * 2
        return {"permute_copy": torch.permute_copy(y, (1, 0, 2)), "view_copy": torch.view_copy(y, (6, 4)),
                "select_copy": torch.select_copy(y, 1, -1), "slice_copy": torch.slice_copy(y, 2, 1, 4, 2),
                "split_copy": torch.split_copy(y, 2, 2)[1], "unbind_copy": torch.unbind_copy(y, 1)[0],
                "split_with_sizes_copy": torch.split_with_sizes_copy(y, [1, 3], 2)[1],
                "expand_copy": torch.expand_copy(y[:1], (3, 3, 4)), "squeeze_copy": torch.squeeze_copy(y[:, :1], 1),
                "squeeze_copy_dims": torch.squeeze_copy(y[:1, :1], [0, 1]),
                "unsqueeze_copy": torch.unsqueeze_copy(y, 0),
                "transpose_copy": torch.transpose_copy(y, 0, 2), "t_copy": torch.t_copy(y[0])}

    check(view_copies, uniform(gen, 2, 3, 4))


def test_as_strided_over_dense_layouts(check, gen):
    def restrided(x, c):  # x [2, 3, 4]; c [2, 6, 5, 5] channels-last
        y = x * 2
        pooled = (c * 2).mean((-1, -2), keepdim=True)  # [2, 6, 1, 1], channels-last as c
        return {"transposed": torch.as_strided(y, (4, 6), (1, 4)) + 1, "run": torch.as_strided(y, (2, 5), (5, 1)) + 1,
                "run_from": torch.as_strided(y, (3, 2, 2), (4, 2, 1), 7) + 1,
                "size_one_dims": torch.as_strided(y, (1, 24, 1), (99, 1, 5)) + 1,
                "copy": torch.as_strided_copy(y, (6, 4), (4, 1)),
                # the pooled tensor's channels-last strides: what functionalization writes for
                # torchvision's ResNets before their flatten
                "pooled": torch.as_strided(pooled, (2, 6, 1, 1), (6, 1, 6, 6)).flatten(1) + 1,
                "pooled_read_across": torch.as_strided(c * 2, (2, 5, 5, 6), (150, 30, 6, 1)) + 1}

    check(restrided, uniform(gen, 2, 3, 4), uniform(gen, 2, 6, 5, 5).contiguous(memory_format=torch.channels_last))


def test_as_strided_that_gathers_is_split_out(gen, caplog):
    x = uniform(gen, 4, 4)
    f = lambda x: torch.as_strided(x * 2, (3, 3), (1, 1)) + 1  # noqa: E731  (overlapping windows)
    with caplog.at_level(logging.WARNING, logger="tilefuse"):
        got = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})(x)
    torch.testing.assert_close(got, f(x))
    assert "not a dense run of its source's storage (a gather)" in caplog.text, caplog.text


def test_slicing(check, gen):
    def slicing(x):  # [4, 6, 8]; each slice scaled, so the graph computes it
        return {"step": x[..., 1:5:2] * 2, "select": x[:, 3] * 2, "first": x[1] * 2, "negative": x[-1, :, -3:] * 2,
                "both_ends": x[:, 1:-1] * 2, "strided": x[::2, ::3] * 2, "past_the_ends": x[:, -10:100] * 2,
                "tail": x[..., 7:] * 2, "select_negative": x[:, :, -2] * 2, "narrow": x.narrow(2, 2, 3) * 2,
                "step_past_end": x[:, 1::4, 2:50:3] * 2}

    check(slicing, uniform(gen, 4, 6, 8))


def test_split_cat_stack(check, gen):
    def split_cat(x, y, i):  # x, y [3, 8]; i [3, 2] integers
        a, b = torch.split(x, [3, 5], 1)
        chunks = torch.chunk(x, 3, 1)  # 3, 3, 2 columns
        rows = torch.unbind(x, 0)
        halves_ = x.split(4, 1)
        return {"cat": torch.cat([x, y], 1), "cat_rows": torch.cat([x, y, x], 0),
                "cat_negative_dim": torch.cat([x, y], -2),
                "cat_promotes": torch.cat([x, i], 1), "cat_one": torch.cat([y]) * 2, "stack": torch.stack([x, y]),
                "stack_last": torch.stack([x, y], -1), "split_first": a * 2, "split_second": b * 2,
                "chunk_last": chunks[2] * 2, "unbind": rows[1] * 2, "split_equal": halves_[1] * 2,
                "hstack": torch.hstack([x, y]), "cat_empty": torch.cat([x.flatten(), torch.zeros(0)])}

    check(split_cat, uniform(gen, 3, 8), uniform(gen, 3, 8), integers(gen, 3, 2))


def test_gathers_and_advanced_indexing(check, gen):
    def gathers(x, idx, idx32, negative, index, grid, x3):
        return {"index_select": x.index_select(1, idx), "index_select_i32": x.index_select(0, idx32),
                "gather": torch.gather(x, 1, index), "gather_rows": torch.gather(x, 0, grid.t().contiguous()),
                "gather_smaller_index": torch.gather(x, 1, index[:3, :2]), "index": x[idx], "index_columns": x[:, idx],
                "index_negative": x[negative], "index_2d": x[grid], "index_last_dim": x3[..., idx] * 2,
                "index_middle": x3[:, idx32], "index_select_0d": x.index_select(1, idx[1]) * 2}

    x = uniform(gen, 5, 6)
    idx = torch.tensor([2, 0, 4, 2])
    check(gathers, x, idx, torch.tensor([4, 1], dtype=torch.int32), torch.tensor([-1, -5, 2]),
          integers(gen, 5, 3, low=0, high=6), integers(gen, 2, 3, low=0, high=5), uniform(gen, 2, 5, 6))


def test_indexing_with_several_index_tensors(check, gen):
    def several(x, x3, rows, cols, column, row32):  # x [5, 6], x3 [2, 5, 6]; rows [3] cols [3] column [4, 1]
        return {"pairs": x[rows, cols], "pairs_negative": x[-rows - 1, cols], "broadcast": x[column, cols],
                "trailing": x3[:, rows, cols] * 2, "leading": x3[column % 2, rows] * 2,
                "mixed_dtypes": x[row32, cols[:1]]}

    check(several, uniform(gen, 5, 6), uniform(gen, 2, 5, 6), integers(gen, 3, low=0, high=5),
          integers(gen, 3, low=-6, high=6), integers(gen, 4, 1, low=0, high=5),
          integers(gen, 2, low=0, high=5, dtype=torch.int32))


def test_index_put_along_one_dim(check, gen):
    # A static KV cache's update (index_copy_ at the step's positions) and x[idx] = v: one
    # position (a decode step), several (a prompt), negative, values broadcast, along a later dim,
    # and positions none of the entries name (x kept there).
    def put(cache, k, position, positions, x, rows, v, scalar_row):
        return {"decode": cache.index_copy(2, position, k[:, :, :1]), "prompt": cache.index_copy(2, positions, k),
                "rows": torch.index_put(x, (rows,), v), "negative": torch.index_put(x, (-rows - 1,), v * 3),
                "broadcast_row": torch.index_put(x, (rows[:1],), scalar_row), "columns": x.index_copy(1, rows[:2], x[:, 2:4] * 2)}

    cache, k = uniform(gen, 1, 3, 9, 4, dtype=torch.bfloat16), uniform(gen, 1, 3, 4, 4, dtype=torch.bfloat16)
    check(put, cache, k, torch.tensor([5]), torch.tensor([2, 3, 4, 5]), uniform(gen, 7, 6), torch.tensor([4, 0, 6]),
          uniform(gen, 3, 6), uniform(gen, 6), more_calls=[(cache, k, torch.tensor([8]), torch.tensor([0, 1, 7, 8]),
                                                             uniform(gen, 7, 6), torch.tensor([1, 2, 3]), uniform(gen, 3, 6),
                                                             uniform(gen, 6))])


def test_a_cache_updated_in_place_through_tilefuse(gen):
    # The static cache's own call: index_copy_ on an input (AOTAutograd writes the new value
    # back into it), and attention over the updated cache.
    def step(cache, k, position):
        cache.index_copy_(2, position, k)
        return torch.nn.functional.scaled_dot_product_attention(k, cache, cache)

    compiled = torch.compile(step, backend="tilefuse", options={"backend": "cpu"}, fullgraph=True)
    cache, k = uniform(gen, 1, 2, 8, 4), uniform(gen, 1, 2, 1, 4)
    ours, theirs = cache.clone(), cache.clone()
    for position in (3, 4, 0):
        got, want = compiled(ours, k, torch.tensor([position])), step(theirs, k, torch.tensor([position]))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        k = k + 1


def test_index_put_that_accumulates_is_split_out(gen, caplog):
    x, rows, v = uniform(gen, 5, 3), torch.tensor([1, 1, 4]), uniform(gen, 3, 3)
    f = lambda x, rows, v: torch.index_put(x, (rows,), v, accumulate=True) * 2  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="tilefuse"):
        got = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})(x, rows, v)
    assert "does not take aten.index_put.default (accumulate=True" in caplog.text, caplog.text
    torch.testing.assert_close(got, f(x, rows, v))


def test_scatter_of_one_index_per_line(check, gen):
    # A cross-entropy backward's one-hot of its targets: scatter(zeros, 1, target[:, None], -1).
    def scatter(x, target, rows, src):  # x [4, 7]; target [4, 1] in [0, 7); rows [1, 7] in [0, 4); src [4, 3]
        return {"one_hot": torch.zeros_like(x).scatter(1, target, -1.0), "value": x.scatter(-1, target, 2.5),
                "src": x.scatter(1, target, src), "along_rows": x.scatter(0, rows, src[:1, :1].expand(1, 7))}

    check(scatter, uniform(gen, 4, 7), integers(gen, 4, 1, low=0, high=7), integers(gen, 1, 7, low=0, high=4),
          uniform(gen, 4, 3))


def test_dropout_s_deterministic_ends(check, gen):
    # Its random numbers (torch.rand at each call) can't match eager's: here p = 0 and p = 1;
    # test_torch_compile checks the random middle (kept fraction, scale, the backward).
    check(lambda x: {"keep_all": F.dropout(x, 0.0, training=True), "drop_all": F.dropout(x, 1.0, training=True),
                     "mask": torch.native_dropout(x, 1.0, True)[1], "mask_all": torch.native_dropout(x, 0.0, True)[1]},
          uniform(gen, 4, 7))


def test_a_scatter_of_several_indices_per_line_is_split_out(gen, caplog):
    # Two targets a row: written where either points, which the comparison above does not do.
    x, target = uniform(gen, 4, 7), integers(gen, 4, 2, low=0, high=7)
    f = lambda x, t: x.scatter(1, t, -1.0) * 2  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="tilefuse"):
        got = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})(x, target)
    torch.testing.assert_close(got, f(x, target))
    assert "does not take aten.scatter.value (an index other than one entry a line)" in caplog.text, caplog.text


def test_embedding(check, gen):
    embedding = randomize(nn.Embedding(10, 4, padding_idx=0), gen)
    check(lambda w, tokens, tokens32: {"functional": F.embedding(tokens, w), "module": embedding(tokens32)},
          uniform(gen, 10, 4), integers(gen, 2, 5, low=0, high=10), integers(gen, 3, low=0, high=10, dtype=torch.int32))


def test_pad_and_repeat(check, gen):
    def pad_repeat(x, i, b):  # [2, 3, 4]
        return {"pad_last": F.pad(x, (1, 2)), "pad_two_dims": F.pad(x, (1, 1, 2, 0), value=3.5),
                "crop": F.pad(x, (-1, 2)), "crop_and_pad": F.pad(x, (0, 0, -1, -1, 1, 0)),
                "pad_ints": F.pad(i, (2, 1), value=7), "pad_bool": F.pad(b, (1, 1), value=True),
                "repeat": x.repeat(2, 1, 3), "repeat_more_dims": x.repeat(2, 1, 1, 2), "repeat_ints": i.repeat(1, 2, 1),
                "tile": torch.tile(x, (2,))}

    check(pad_repeat, uniform(gen, 2, 3, 4), integers(gen, 2, 3, 4), uniform(gen, 2, 3, 4) > 0)


# ---- reductions

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reductions(check, gen, dtype):
    def reductions(x, p):  # p in [0.5, 1.5], for products
        return {"sum": x.sum(), "sum_dim": x.sum(1), "sum_dims_keepdim": x.sum((0, 2), keepdim=True),
                "mean": x.mean(), "mean_dim": x.mean(-1), "mean_dims_keepdim": x.mean((0, 1), keepdim=True),
                "prod": p.prod(), "prod_dim": p.prod(1), "prod_keepdim": p.prod(2, keepdim=True), "amax": x.amax(-1),
                "amax_dims": x.amax((0, 2)), "amin_keepdim": x.amin(0, keepdim=True), "max": x.max(), "min": x.min(),
                "max_dim": x.max(-1).values, "min_dim_keepdim": x.min(1, keepdim=True)[0],
                "max_dim0": torch.max(x, 0)[0],
                "sum_f32": x.sum(-1, dtype=torch.float32), "sum_no_dims": x.sum(dim=[])}

    check(reductions, uniform(gen, 3, 4, 5, dtype=dtype), uniform(gen, 3, 4, 5, low=0.5, high=1.5, dtype=dtype))


def test_max_and_min_with_their_indices(check, gen):
    def extremes(x, ties, i, nan):
        values, indices = x.max(-1)
        return {"max": values, "argmax": indices, "min_keepdim": x.min(1, keepdim=True), "max_ties": ties.max(0),
                "min_ties": ties.min(-1), "max_ints": i.max(1), "min_ints": torch.min(i, 0),
                # a NaN is the extreme (its value checked as isnan: NaN never equals NaN here)
                "argmax_nan": nan.max(-1).indices, "argmin_nan": nan.min(-1).indices,
                "max_nan_is_nan": nan.max(-1).values.isnan()}

    nan = uniform(gen, 3, 6)
    nan[0, 2], nan[2, 1], nan[2, 4] = math.nan, math.nan, math.nan
    check(extremes, uniform(gen, 3, 4, 5), halves(gen, 4, 6, low=-1, high=1), integers(gen, 3, 5, low=-3, high=3), nan)


def test_integer_and_bool_reductions(check, gen):
    def int_reductions(i, j, b, x):
        return {"sum_i64": i.sum(), "sum_i32": j.sum(1), "sum_bool": b.sum(), "count": b.sum(-1), "amax": i.amax(0),
                "min": j.min(), "prod": j.prod(1), "max_dim": i.max(1).values,
                "mean_f64": x.mean(0, dtype=torch.float64),
                "sum_to_float": i.sum(0, dtype=torch.float32)}

    check(int_reductions, integers(gen, 4, 6), integers(gen, 4, 6, low=-3, high=4, dtype=torch.int32),
          uniform(gen, 4, 6) > 0, uniform(gen, 4, 6))


def test_any_and_all(check, gen):
    def any_all(b, x, i):
        return {"any_dim": b.any(-1), "any": b.any(), "any_dims": b.any((0, 2)), "any_keepdim": b.any(1, keepdim=True),
                "all_dim": b.all(-1), "all": b.all(), "all_dims": b.all((0, 1)), "any_floats": x.any(1),
                "all_ints": i.all(0), "compared_any": (x > 0).any(-1), "all_floats": x.all(2)}

    check(any_all, uniform(gen, 3, 4, 3, low=-0.5, high=3) > 0, halves(gen, 3, 4, 3, low=-1, high=2),
          integers(gen, 3, 4, 3, low=-1, high=3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_variance(check, gen, dtype):
    def variances(x):
        return {"var_dim": torch.var(x, 1), "var_biased": torch.var(x, 0, unbiased=False), "var": torch.var(x),
                "var_correction0": torch.var(x, (0, 1), correction=0), "var_mean": torch.var_mean(x, 1),
                "var_mean_keepdim": torch.var_mean(x, -1, keepdim=True, correction=2), "std": torch.std(x, 1),
                "var_keepdim": torch.var(x, 1, keepdim=True), "std_mean": torch.std_mean(x, 0)}

    check(variances, uniform(gen, 4, 6, low=-1, high=3, dtype=dtype))


def test_cumsum(check, gen):
    def cumsums(x, i, b):
        return {"rows": torch.cumsum(x, 1), "columns": x.cumsum(0), "last": x.cumsum(-1), "ints": i.cumsum(1),
                "bools": b.cumsum(-1), "to_f64": x.cumsum(1, dtype=torch.float64), "i32": i.int().cumsum(0),
                "positions": (b.long().cumsum(-1) - 1) * b}  # position ids from an attention mask

    check(cumsums, uniform(gen, 4, 9), integers(gen, 4, 9), uniform(gen, 4, 9) > -0.5)


# ---- matrix products

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matrix_products(check, gen, dtype):
    def matmuls(a, b, c, d, v, w, bias, batch_bias):  # a [3, 4] b [4, 5] c [2, 3, 4] d [2, 4, 5]
        return {"matmul": a @ b, "mm": torch.mm(a, b), "bmm": torch.bmm(c, d), "broadcast_matmul": torch.matmul(c, b),
                "batched_matmul": c @ d, "matrix_vector": a @ v, "vector_matrix": v @ b, "dot": torch.dot(v, w),
                "addmm": torch.addmm(bias, a, b), "addmm_scaled": torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
                "addmm_beta0": torch.addmm(bias, a, b, beta=0), "baddbmm": torch.baddbmm(batch_bias, c, d, alpha=0.5),
                "einsum": torch.einsum("bij,bjk->bik", c, d), "matmul_4d": torch.matmul(c[None], d[:1])}

    shapes = [(3, 4), (4, 5), (2, 3, 4), (2, 4, 5), (4,), (4,), (5,), (2, 3, 5)]
    check(matmuls, *[uniform(gen, *s, dtype=dtype) for s in shapes])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_modules(check, gen, dtype):
    class Linears(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(8, 6)
            self.second = nn.Linear(6, 4, bias=False)

        def forward(self, x, tokens):
            h = self.first(x)  # [2, 3, 8]: a view to 2-D, addmm, a view back
            return {"linear": h, "no_bias": self.second(h[0]), "chained": self.second(F.relu(h)),
                    "flat": self.first(tokens)}

    module = randomize(Linears(), gen).to(dtype)
    check(module, uniform(gen, 2, 3, 8, dtype=dtype), uniform(gen, 8, dtype=dtype))


# ---- neural-network ops

@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(check, gen, dtype):
    def softmaxes(x):
        return {"softmax": x.softmax(-1), "softmax_dim1": F.softmax(x, 1), "log_softmax": F.log_softmax(x, -1),
                "log_softmax_dim0": torch.log_softmax(x, 0), "softmax_to_f32": F.softmax(x, -1, dtype=torch.float32),
                "softmin": F.softmin(x, -1), "masked": x.masked_fill(x > 2, -math.inf).softmax(-1),
                "masked_log": x.masked_fill(x > 2, -math.inf).log_softmax(-1)}

    check(softmaxes, uniform(gen, 2, 3, 8, low=-4, high=4, dtype=dtype))


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.LayerNorm(5)
        self.layer_plain = nn.LayerNorm([4, 5], elementwise_affine=False)
        self.layer_no_bias = nn.LayerNorm(5, bias=False)
        self.group = nn.GroupNorm(2, 4)
        self.group_plain = nn.GroupNorm(4, 4, affine=False)
        self.batch = nn.BatchNorm2d(4)
        self.batch_plain = nn.BatchNorm2d(4, affine=False)
        self.batch1d = nn.BatchNorm1d(4)

    def forward(self, x, rows):  # x [2, 4, 3, 5], rows [6, 4]
        return {"layer": self.layer(x), "layer_plain": self.layer_plain(x[:, :, 0]),
                "layer_no_bias": self.layer_no_bias(x), "group": self.group(x), "group_plain": self.group_plain(x),
                "batch": self.batch(x), "batch_plain": self.batch_plain(x), "batch1d": self.batch1d(rows),
                "batch1d_3d": self.batch1d(x[:, :, 0]), "layer_functional": F.layer_norm(x, (3, 5), eps=1e-3),
                "group_functional": F.group_norm(x[:, :, :, 0], 1, eps=1e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normalizations(check, gen, dtype):
    module = randomize(Norms(), gen).to(dtype)
    check(module, uniform(gen, 2, 4, 3, 5, low=-1, high=3, dtype=dtype), uniform(gen, 6, 4, dtype=dtype))


class Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = nn.Conv2d(3, 4, 3, padding=1)
        self.grouped = nn.Conv2d(3, 6, 3, stride=2, groups=3, bias=False)
        self.dilated = nn.Conv2d(3, 2, (3, 2), padding=(2, 1), dilation=(2, 1))
        self.depthwise = nn.Conv2d(3, 3, 3, padding="same", groups=3)
        self.same_even = nn.Conv2d(3, 2, 2, padding="same")
        self.one = nn.Conv1d(3, 2, 3, stride=2, padding=1)
        self.three = nn.Conv3d(3, 2, 2)

    def forward(self, x, w):  # x [1, 3, 7, 6]
        return {"plain": self.plain(x), "grouped": self.grouped(x), "dilated": self.dilated(x),
                "depthwise": self.depthwise(x), "same_even": self.same_even(x), "conv1d": self.one(x[:, :, 0]),
                "conv3d": self.three(x[:, :, None].expand(-1, -1, 3, -1, -1) * 1),
                "functional_weight_input": F.conv2d(x, w, stride=(1, 2))}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_convolutions(check, gen, dtype):
    module = randomize(Convs(), gen).to(dtype)
    check(module, uniform(gen, 1, 3, 7, 6, dtype=dtype), uniform(gen, 2, 3, 2, 2, dtype=dtype))


def test_convolution_on_a_gpu_follows_cudnn_allow_tf32():
    """PyTorch runs an f32 convolution on a GPU on TF32 tensor cores under
    torch.backends.cudnn.allow_tf32 (its default), as TorchInductor's do: so does the translation
    (the conv's tf32 attribute); on the CPU, in bf16 and with the flag off, exactly."""
    from types import SimpleNamespace

    from torch._subclasses.fake_tensor import FakeTensorMode

    from tilefuse.fx.nn import _convolution_tf32

    with FakeTensorMode():
        on_gpu = torch.empty(1, 4, 8, 8, device="cuda")
        half_on_gpu = torch.empty(1, 4, 8, 8, device="cuda", dtype=torch.bfloat16)
    on_cpu = torch.empty(1, 4, 8, 8)
    ctx = lambda value: SimpleNamespace(node=SimpleNamespace(meta={"val": value}))  # noqa: E731
    allowed = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert _convolution_tf32(ctx(on_gpu))
        assert not _convolution_tf32(ctx(on_cpu)) and not _convolution_tf32(ctx(half_on_gpu))
        torch.backends.cudnn.allow_tf32 = False
        assert not _convolution_tf32(ctx(on_gpu))
        torch.backends.cudnn.allow_tf32 = True
        # A patch embedding (ViT's 16x16 windows 16 apart, no padding), which cuDNN ran in exact
        # f32, stays exact; overlapping, padded or 1x1 windows go to TF32.
        from tilefuse.fx.nn import convolution

        def conv_tf32(kernel, stride, padding):
            calls = []
            fake = SimpleNamespace(node=SimpleNamespace(meta={"val": on_gpu}), rank=lambda v: 4,
                                   shape_of=lambda v: [8, 4] + list(kernel), conv=lambda *a, **k: calls.append(k))
            convolution(fake, "x", "w", None, stride, padding, [1, 1], False, [0, 0], 1)
            return calls[0]["tf32"]

        assert not conv_tf32((16, 16), [16, 16], [0, 0])
        assert conv_tf32((3, 3), [1, 1], [1, 1]) and conv_tf32((1, 1), [1, 1], [0, 0]) and conv_tf32((1, 1), [2, 2], [0, 0])
        assert conv_tf32((2, 2), [2, 2], [1, 1])  # padded
    finally:
        torch.backends.cudnn.allow_tf32 = allowed


def test_a_tf32_convolution_computes_exactly_on_the_cpu():
    """The builder's conv takes tf32; the CPU backend computes f32 exactly either way."""
    import numpy as np

    from tilefuse import _tilefuse
    from tilefuse._model import _wrap

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 3, 6, 6)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    outputs = []
    for tf32 in (True, False):
        b = _tilefuse.GraphBuilder()
        y = b.conv(b.parameter("x", "f32", [1, 3, 6, 6]), b.constant(w), None, [1, 1], [1, 1, 1, 1], [1, 1], 1, tf32=tf32)
        b.output(y, "y")
        outputs.append(_wrap(_tilefuse.compile_graph(b.build(), "cpu", False, True, 0), "a built graph")(x)[0])
    want = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), padding=1).numpy()
    for got in outputs:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_pooling(check, gen):
    def pools(x, x1, x3):  # x [1, 2, 6, 6], x1 [2, 3, 8], x3 [1, 2, 4, 4, 4]
        return {"max": F.max_pool2d(x, 2), "max_padded": F.max_pool2d(x, 3, stride=1, padding=1),
                "max_dilated": F.max_pool2d(x, 2, stride=2, dilation=2),
                "max_ceil_exact": F.max_pool2d(x, 3, ceil_mode=True),
                "max_rect": F.max_pool2d(x, (3, 2), stride=(1, 2)), "avg": F.avg_pool2d(x, 2),
                "max_padded_negative": F.max_pool2d(-x.abs() - 0.1, 3, stride=2, padding=1),  # pads are -inf, not 0
                "avg_padded": F.avg_pool2d(x, 3, stride=1, padding=1),
                "avg_padded_excluded": F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False),
                "adaptive_1": F.adaptive_avg_pool2d(x, 1), "adaptive": F.adaptive_avg_pool2d(x, (3, 2)),
                "max1d": F.max_pool1d(x1, 2), "avg1d": F.avg_pool1d(x1, 3, stride=2, padding=1),
                "adaptive1d": F.adaptive_avg_pool1d(x1, 4), "max3d": F.max_pool3d(x3, 2),
                "avg3d": F.avg_pool3d(x3, 2, stride=1), "max_module": nn.MaxPool2d(2, stride=1)(x),
                "global_mean": x.mean((2, 3), keepdim=True)}


def test_pooling_with_partial_windows_and_divisors(check, gen):
    # ceil_mode's last window hanging past the input, divisor_override, adaptive windows of unequal sizes.
    def pools(x, x1, x3):  # x [1, 2, 6, 6], x1 [2, 3, 8], x3 [1, 2, 4, 4, 4]
        return {"max_ceil": F.max_pool2d(x, 4, stride=3, ceil_mode=True),
                "max_ceil_padded": F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
                "max_ceil_negative": F.max_pool2d(-x.abs() - 0.1, 4, stride=3, ceil_mode=True),
                "avg_ceil": F.avg_pool2d(x, 4, stride=3, ceil_mode=True),
                "avg_ceil_padded_excluded": F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                "avg_ceil_padded_counted": F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                "avg1d_ceil_padded": F.avg_pool1d(x1, 4, 3, 2, ceil_mode=True),
                "avg_divisor": F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=4),
                "avg_divisor_ceil": F.avg_pool2d(x, 4, stride=3, ceil_mode=True, divisor_override=5),
                "adaptive_uneven": F.adaptive_avg_pool2d(x, (4, 5)), "adaptive_mixed": F.adaptive_avg_pool2d(x, (3, 4)),
                "adaptive1d_uneven": F.adaptive_avg_pool1d(x1, 3), "max1d_ceil": F.max_pool1d(x1, 3, 2, ceil_mode=True),
                "max3d_ceil": F.max_pool3d(x3, 3, stride=2, ceil_mode=True),
                "avg3d_ceil": F.avg_pool3d(x3, 3, stride=2, ceil_mode=True)}

    check(pools, uniform(gen, 1, 2, 6, 6), uniform(gen, 2, 3, 8), uniform(gen, 1, 2, 4, 4, 4))

    check(pools, uniform(gen, 1, 2, 6, 6), uniform(gen, 2, 3, 8), uniform(gen, 1, 2, 4, 4, 4))


@pytest.mark.parametrize("whole", [False, True], ids=["as_traced", "kept_whole"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_scaled_dot_product_attention(check, gen, dtype, whole, monkeypatch):
    # kept_whole: each call as tilefuse::attention (tilefuse.fx.whole_attention, on for CUDA
    # tensors; here for the CPU's), as_traced: the CPU flash kernel PyTorch's tracing picks.
    from tilefuse.fx import whole_attention
    monkeypatch.setattr(whole_attention, "WHOLE_ON", {"cpu"} if whole else set())

    def attentions(q, k, v, k_long, v_long, mask, visible, k_grouped, v_grouped, padding):
        sdpa = F.scaled_dot_product_attention
        return {"plain": sdpa(q, k, v), "causal": sdpa(q, k, v, is_causal=True),
                "causal_more_keys": sdpa(q, k_long, v_long, is_causal=True),
                "float_mask": sdpa(q, k, v, attn_mask=mask),
                "bool_mask": sdpa(q, k, v, attn_mask=visible), "scale": sdpa(q, k, v, scale=0.3),
                "grouped_query": sdpa(q, k_grouped, v_grouped, enable_gqa=True),
                "wider_values": sdpa(q, k_long, torch.cat([v_long, v_long * 2], -1)),
                "decode_causal": sdpa(q[:, :, -1:], k_long, v_long, is_causal=True),  # aligned top-left: key 0 only
                "padding_mask": sdpa(q, k_long, v_long, attn_mask=padding),
                "f32_padding_mask": sdpa(q, k_long, v_long, attn_mask=padding.float())}  # as BERT's on half inputs

    b, h, length, keys, d = 2, 4, 5, 7, 8
    q, k, v = (uniform(gen, b, h, length, d, dtype=dtype) for _ in range(3))
    k_long, v_long = (uniform(gen, b, h, keys, d, dtype=dtype) for _ in range(2))
    visible = (uniform(gen, length, length) > 0) | torch.eye(length, dtype=torch.bool)  # no row fully masked
    k_grouped, v_grouped = (uniform(gen, b, 2, length, d, dtype=dtype) for _ in range(2))
    padding = torch.zeros(b, 1, 1, keys, dtype=dtype)
    padding[0, ..., -2:] = -math.inf  # the first sequence's last two keys are padding
    check(attentions, q, k, v, k_long, v_long, uniform(gen, length, length, dtype=dtype), visible, k_grouped, v_grouped,
          padding)


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_cpu_flash_kernels_logsumexp_and_fully_masked_rows(check, gen, dtype):
    # A training forward reads the CPU kernel's logsumexp ([batch, heads, queries], f32) for
    # PyTorch's backward; a row whose keys are all masked gives 0 in both the output and it.
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    def with_statistics(q, k, v, mask):
        causal, causal_lse = flash(q, k, v, 0.0, True)
        masked, masked_lse = flash(q, k, v, 0.0, False, attn_mask=mask)
        return {"causal": causal, "causal_lse": causal_lse, "masked": masked, "masked_lse": masked_lse}

    b, h, length, d = 2, 3, 6, 8
    q, k, v = (uniform(gen, b, h, length, d, dtype=dtype) for _ in range(3))
    mask = uniform(gen, length, length, dtype=dtype)
    mask[2, :] = -math.inf  # query 2 sees no key
    mask[4, 1:] = -math.inf  # query 4 sees key 0 only
    check(with_statistics, q, k, v, mask)


def test_outputs_that_are_inputs_or_repeats_are_returned_as_eager_returns_them():
    # A training forward returns some of its inputs (saved for the backward) and may return a
    # value twice: the compiled graph computes neither; the call's own tensors come back.
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.fx import Unsupported, translate

    def forward(x, w):
        y = x * w
        return y, x, y, w

    x, w = torch.randn(3, 4), torch.randn(3, 4)
    translation = translate(make_fx(forward)(x, w), [x, w], set())
    assert translation.forwarded_arguments == {1: 0, 3: 1} and translation.repeated_outputs == {2: 0}
    from tilefuse import _tilefuse
    assert len(_tilefuse.compile_graph(translation.graph, "reference", False, True, 0).outputs) == 1, "y only"
    y = torch.empty(3, 4)
    got = translation.outputs([y], [x, w])
    assert got[0] is y and got[1] is x and got[2] is y and got[3] is w
    with pytest.raises(Unsupported, match="computes nothing"):
        translate(make_fx(lambda x, w: (w, x))(x, w), [x, w], set())


def test_a_transposed_tensor_inside_a_tuple_argument_is_read_where_it_lies():
    # A split graph's part receives an op's tuple result (cuDNN attention's gradients, laid out
    # as its inputs): its tensors too are read in memory order, not copied dense per call.
    import operator

    from tilefuse import _tilefuse
    from tilefuse._model import _wrap
    from tilefuse.fx import translate

    graph = torch.fx.Graph()
    pair = graph.placeholder("pair")
    first = graph.call_function(operator.getitem, (pair, 0))
    second = graph.call_function(operator.getitem, (pair, 1))
    difference = graph.call_function(torch.ops.aten.sub.Tensor, (first, second))
    graph.output((difference,))
    gm = torch.fx.GraphModule({}, graph)
    x, y = torch.randn(4, 6).t(), torch.randn(6, 4)
    first.meta["val"], second.meta["val"], difference.meta["val"] = x, y, (x - y).contiguous()  # as traced
    translation = translate(gm, [(x, y)], set())
    assert translation.input_orders == {0: (1, 0)}
    inputs = translation.inputs([(x, y)])
    assert inputs[0].is_contiguous() and inputs[0].data_ptr() == x.data_ptr()
    model = _wrap(_tilefuse.compile_graph(translation.graph, "reference", False, True, 0), "a test graph")
    (got,) = translation.outputs(model(*inputs), [(x, y)])
    torch.testing.assert_close(got, x - y, rtol=0, atol=0)


def test_outputs_that_are_views_of_inputs_are_taken_by_pytorch_not_copied():
    # A training forward saves views of its inputs (a transposed weight): the compiled graph
    # does not write them; the call's argument, viewed as eager views it, comes back.
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse import _tilefuse
    from tilefuse.fx import translate

    def forward(x, w):
        wt = w.t()
        return x @ wt, wt, x.view(2, 3, 4)[:, 1:], x * 2

    x, w = torch.randn(6, 4), torch.randn(5, 4)
    translation = translate(make_fx(forward)(x, w), [x, w], set())
    assert sorted(translation.viewed_arguments) == [1, 2]
    graph = _tilefuse.compile_graph(translation.graph, "reference", False, True, 0)
    assert len(graph.outputs) == 2, "the product and x * 2 only"
    from tilefuse._model import _wrap
    model = _wrap(graph, "a test graph")
    x2, w2 = torch.randn(6, 4), torch.randn(5, 4)  # another call's arguments
    got = translation.outputs(model(*translation.inputs([x2, w2])), [x2, w2])
    expected = forward(x2, w2)
    assert got[1].data_ptr() == w2.data_ptr() and got[1].stride() == expected[1].stride()
    assert got[2].data_ptr() == x2.data_ptr() + 4 * 4 and got[2].stride() == expected[2].stride()
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


def test_inputs_and_outputs_in_other_layouts_are_read_and_written_where_they_lie():
    # A transposed input is the graph's input in memory order (a permuted view of the call's
    # tensor: no copy), its dims put back by a transpose in the graph; an output eager lays out
    # transposed is written so by the graph and comes back as a view with eager's strides.
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse import _tilefuse
    from tilefuse.fx import storage_order, translate

    def forward(x, w):
        return (x * w).transpose(0, 2), x.sum(1)

    x = torch.randn(4, 5, 6).transpose(0, 1)  # [5, 4, 6], dims 1, 0, 2 in memory
    w = torch.randn(5, 4, 6)
    assert storage_order(x) == (1, 0, 2) and storage_order(w) is None
    assert storage_order(torch.randn(6, 1, 4).transpose(0, 2)) == (1, 2, 0)  # dims of size one first
    assert storage_order(torch.randn(3, 4).expand(2, 3, 4)) is None  # no order: a dim with stride 0
    gm = make_fx(forward)(x, w)
    translation = translate(gm, [x, w], set())
    assert translation.input_orders == {0: (1, 0, 2)}
    eager = forward(x, w)
    assert translation.output_orders == {0: storage_order(eager[0])} and storage_order(eager[0]) is not None
    graph = _tilefuse.compile_graph(translation.graph, "cpu", False, True, 0)
    from tilefuse._model import _wrap
    model = _wrap(graph, "a test graph")
    inputs = translation.inputs([x, w])
    assert inputs[0].is_contiguous() and inputs[0].data_ptr() == x.data_ptr(), "x read where it lies"
    assert list(inputs[0].shape) == [4, 5, 6]
    out = translation.outputs(model(*inputs), [x, w])
    assert out[0].stride() == eager[0].stride() and out[1].is_contiguous()
    for got, expected in zip(out, eager):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_unaligned_logits_are_written_padded_and_returned_as_eager_columns():
    # pad_outputs (an inference forward on the GPU): x · wᵀ over 1029 bf16 words (rows of 2058
    # bytes) is written with zero columns up to 1032 and comes back as a strided view of the
    # first 1029; other outputs, aligned vocabularies and products of untransposed weights stay.
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse import _tilefuse
    from tilefuse._model import _wrap
    from tilefuse.fx import translate

    def forward(h, w, v, u):
        return (h @ w.t()).view(2, 3, -1), h @ v.t(), h @ u, h * 2

    gen = torch.Generator().manual_seed(3)
    h = torch.randn(6, 16, generator=gen).to(torch.bfloat16)
    w = torch.randn(1029, 16, generator=gen).to(torch.bfloat16)
    v = torch.randn(1032, 16, generator=gen).to(torch.bfloat16)
    u = torch.randn(16, 1029, generator=gen).to(torch.bfloat16)
    gm = make_fx(forward)(h, w, v, u)
    assert translate(gm, [h, w, v, u], set()).padded_columns == {}, "not asked for"
    translation = translate(gm, [h, w, v, u], set(), pad_outputs=True)
    assert translation.padded_columns == {0: 1029}
    model = _wrap(_tilefuse.compile_graph(translation.graph, "cpu", False, True, 0), "a test graph")
    assert list(model.outputs[0].shape) == [2, 3, 1032]
    got = translation.outputs(model(*translation.inputs([h, w, v, u])), [h, w, v, u])
    assert got[0].shape == (2, 3, 1029) and got[0].stride() == (3 * 1032, 1032, 1)
    for g, e in zip(got, forward(h, w, v, u)):
        torch.testing.assert_close(g.float(), e.float(), rtol=2e-2, atol=2e-2)


def test_a_gpu_attention_kernel_whose_logsumexp_is_read_is_split_out_not_its_whole_graph():
    # A training forward's call whose logsumexp the template cannot write (here: no traced
    # values to check its limits against; test_torch_attention_backward.py has the taken ones)
    # runs in PyTorch and the rest of its graph through tilefuse. Built by hand: the dispatcher
    # picks these kernels for CUDA tensors only.
    import operator

    from tilefuse.fx import unsupported_nodes

    for kernel in (torch.ops.aten._scaled_dot_product_cudnn_attention.default,
                   torch.ops.aten._scaled_dot_product_efficient_attention.default,
                   torch.ops.aten._scaled_dot_product_flash_attention.default):
        for read in ((0,), (0, 1)):
            graph = torch.fx.Graph()
            q, k, v = (graph.placeholder(name) for name in "qkv")
            extra = (None, True) if kernel is not torch.ops.aten._scaled_dot_product_flash_attention.default else ()
            call = graph.call_function(kernel, (q, k, v) + extra)
            graph.output(tuple(graph.call_function(operator.getitem, (call, i)) for i in read))
            refused = unsupported_nodes(torch.fx.GraphModule(torch.nn.Module(), graph))
            assert refused == ([call] if 1 in read else []), (kernel, read, refused)


@pytest.mark.parametrize("causal, nq, nk, dv", [(True, 10, 10, 16), (False, 7, 12, 16)], ids=["causal", "ragged"])
def test_attention_backward(gen, caplog, causal, nq, nk, dv):
    # The CPU flash kernel's backward (what AOTAutograd's backward graph calls) as tilefuse's
    # attention_grad nodes: the gradients of q, k and v against autograd in f64, the backward
    # graph compiled whole.
    caplog.set_level(logging.INFO, logger="tilefuse")

    def attention(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    q = uniform(gen, 2, 3, nq, 16, dtype=torch.float64)
    k = uniform(gen, 2, 3, nk, 16, dtype=torch.float64)
    v = uniform(gen, 2, 3, nk, dv, dtype=torch.float64)
    dout = uniform(gen, 2, 3, nq, dv, dtype=torch.float64)
    compiled = torch.compile(attention, backend="tilefuse", options={"backend": "cpu", "backward": "tilefuse"}, fullgraph=True)
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    theirs = [t.clone().requires_grad_() for t in (q, k, v)]
    got = torch.autograd.grad(compiled(*ours), ours, dout)
    want = torch.autograd.grad(attention(*theirs), theirs, dout)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9 * w.abs().max().item())
    assert "_for_cpu_backward" in " ".join(REACHED), REACHED
    split = [r.getMessage() for r in caplog.records if r.name == "tilefuse" and "running part of a torch.compile graph" in r.getMessage()]
    assert not split, split
    VERIFIED.update(REACHED)


# ---- creation

def test_creation(check, gen):
    def creation(x):  # [3, 4]
        return {"arange": x + torch.arange(4), "arange_start": torch.arange(2, 6) * x,
                "arange_step": x * torch.arange(0.5, 2.5, 0.5), "arange_down": x[0] + torch.arange(10, 0, -3),
                "arange_fraction": torch.arange(-1, 1, 0.3) + x[0, 0], "arange_int_step": torch.arange(1, 12, 3) * 2,
                "full": torch.full((3, 4), 1.5) + x, "full_int": torch.full((2,), 7) * 3,
                "full_bool": torch.full((4,), True),
                "full_int_from_float": torch.full((3,), -2.7, dtype=torch.int32) * 2,
                "zeros": torch.zeros(3, 4) + x, "ones_i32": torch.ones(4, dtype=torch.int32) + 1,
                "new_zeros": x.new_zeros(3, 4) + x, "new_ones": x.new_ones(4) * x[1],
                "new_full": x.new_full((3, 4), -2.0) * x,
                "zeros_like": torch.zeros_like(x) - x, "ones_like_int": torch.ones_like(x, dtype=torch.int64) * 4,
                "full_like": torch.full_like(x, 3.0) * x, "scalar_tensor": torch.scalar_tensor(2.5) * x,
                "empty_like_filled": torch.empty_like(x).fill_(0.25) + x,
                "empty_filled": torch.empty(3, 4).fill_(-0.5) * x}

    check(creation, uniform(gen, 3, 4))


# ---- symbolic sizes

def test_sizes_that_change_between_calls(check, gen):
    # From the second shape on, Dynamo traces sizes as symbols: handlers get this call's integers,
    # computed through the graph's size arithmetic (sym_size, floordiv, sym_float, ...).
    def sized(x, idx):
        n, d = x.shape
        return {"view": x.view(n, d // 2, 2).sum(-1) + torch.arange(d // 2),
                "full": torch.full((n, 1), float(n)) * x, "new_zeros": x.new_zeros(n, d) + x,
                "expand": x[:, None, :].expand(n, 3, d).reshape(n * 3, d), "cat_last_row": torch.cat([x, x[-1:]], 0),
                "pad": F.pad(x, (1, 1)), "split": torch.split(x, max(n // 2, 1))[0],
                "rows_dot": (x.unsqueeze(1) @ x.unsqueeze(2)).squeeze(-1), "mean": x.mean(0),
                "index_select": x.index_select(0, idx), "arange_n": torch.arange(n) * 2}

    calls = [(uniform(gen, n, 8), integers(gen, 2, low=0, high=n)) for n in (3, 5, 7, 4)]
    check(sized, *calls[0], more_calls=calls[1:])


# ---- overloads only decompositions produce

def test_add_scalar_from_rms_norm(check, gen):
    # F.rms_norm decomposes through aten.add.Scalar (mean of squares + eps).
    check(lambda x, w: {"rms_norm": F.rms_norm(x, (8,), eps=1e-5), "weighted": F.rms_norm(x, (8,), w)},
          uniform(gen, 3, 8), uniform(gen, 8))


def test_sub_scalar_from_cosine_embedding_loss(check, gen):
    # cosine_embedding_loss's decomposition computes 1 - cos with aten.sub.Scalar.
    check(lambda x, y, target: {"loss": F.cosine_embedding_loss(x, y, target),
                                "unreduced": F.cosine_embedding_loss(x, y, target, margin=0.2, reduction="none")},
          uniform(gen, 5, 8), uniform(gen, 5, 8), signs(gen, 5).float())


def test_mul_scalar_from_the_math_attention_path(check, gen):
    # 3-D inputs take scaled_dot_product_attention's math path, which scales Q and K with aten.mul.Scalar.
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), uniform(gen, 2, 5, 8), uniform(gen, 2, 6, 8),
          uniform(gen, 2, 6, 8))


# ---- what tilefuse does not take yet: each falls back to PyTorch with the reason logged

@pytest.mark.xfail(strict=True, reason="tilefuse's op table has no bitwise ops on integers (and, or, xor, not "
                                       "take bool): aten.bitwise_* on int tensors are refused")
def test_bitwise_ops_on_integers(check, gen):
    check(lambda i, j: {"and": i & j, "or": i | j, "xor": i ^ j, "not": ~i}, integers(gen, 4, 8), integers(gen, 4, 8))


@pytest.mark.xfail(strict=True, reason="tilefuse's conv has no transposed form: aten.convolution with "
                                       "transposed=True is split out of the graph and runs in PyTorch")
def test_transposed_convolution(check, gen):
    module = randomize(nn.ConvTranspose2d(3, 2, 3, stride=2), gen)
    check(module, uniform(gen, 1, 3, 4, 4))


# ---- every handler has a test

def test_flip(check, gen):
    x = uniform(gen, 3, 5, 7)
    check(lambda x: {"last": torch.flip(x, [-1]), "two": torch.flip(x, [0, 2]), "flipud": torch.flipud(x) * 2}, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_assignment_into_a_slice(check, gen, dtype):
    # x[:, 1:3] = v under torch.compile is functionalized into slice_scatter.
    def assign(x, v, w):
        y = x.clone()
        y[:, 1:3] = v
        y[:, -1:] = w * 2
        z = x.clone()
        z[0] = x[1] + 1  # a select_scatter
        return {"y": y, "z": z}

    check(assign, uniform(gen, 4, 6, dtype=dtype), uniform(gen, 4, 2, dtype=dtype), uniform(gen, 4, 1, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vector_norms(check, gen, dtype):
    x = uniform(gen, 4, 9, dtype=dtype)
    check(lambda x: {"l2_rows": torch.linalg.vector_norm(x, dim=-1), "normalize": F.normalize(x, dim=-1),
                     "l1_kept": torch.linalg.vector_norm(x, ord=1, dim=0, keepdim=True),
                     "inf": torch.linalg.vector_norm(x, ord=math.inf, dim=1),
                     "neg_inf": torch.linalg.vector_norm(x, ord=-math.inf, dim=1),
                     "p3_all": torch.linalg.vector_norm(x, ord=3), "norm": x.norm()}, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_argmax_and_argmin(check, gen, dtype):
    # Ties on a grid of halves (the first index wins, as in PyTorch) and, for floats, a NaN.
    x = halves(gen, 5, 8, low=-2, high=2).to(dtype)
    if dtype.is_floating_point:
        x[2, 3] = math.nan
    check(lambda x: {"argmax_rows": torch.argmax(x, dim=1), "argmin_cols": torch.argmin(x, dim=0, keepdim=True),
                     "argmax_all": torch.argmax(x), "argmin_all_kept": torch.argmin(x, dim=None, keepdim=True)}, x)


def test_every_handler_is_exercised(request):
    module = request.module
    functions = {name for name in dir(module) if name.startswith("test_") and name != request.function.__name__}
    selected = {item.originalname for item in request.session.items if item.module is module}
    if not functions <= selected:
        pytest.skip("only part of this file ran: run the whole file to check every handler is exercised")
    stale = sorted(name for name in UNREACHABLE if name not in HANDLERS)
    assert not stale, f"listed as unreachable but not in HANDLERS (remove them from UNREACHABLE): {stale}"
    reached = sorted(set(UNREACHABLE) & VERIFIED)
    assert not reached, f"listed as unreachable but a test reaches them (remove them from UNREACHABLE): {reached}"
    missing = sorted(set(HANDLERS) - VERIFIED - set(UNREACHABLE))
    assert not missing, (f"{len(missing)} handler(s) no passing test reached (a failed test above, or a new handler "
                         f"without a test here): {missing}")
