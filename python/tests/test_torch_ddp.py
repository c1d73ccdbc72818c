"""Data-parallel training through torch.compile(backend="tilefuse"): two processes on this
machine, each a DistributedDataParallel replica: gloo and the CPU backend (CI), or NCCL and the
CUDA backend, a GPU each (where two GPUs are). Dynamo's DDP optimizer splits the graph at the
gradient buckets, so tilefuse compiles each part's forward and backward and DDP's all-reduces run
between them; the replicas must train as eager DDP does."""

import faulthandler
import json
import logging
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

COMPILED = "compiled a torch.compile graph"
FELL_BACK = "running a torch.compile graph in PyTorch"
WORLD = 2
STEPS = 3


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Two linears of 1.2 MB each: DDP's buckets (1 MB, the least Dynamo's DDP optimizer
        # takes) end after each.
        self.up = torch.nn.Linear(256, 1152)
        self.norm = torch.nn.LayerNorm(1152)
        self.down = torch.nn.Linear(1152, 256)
        self.head = torch.nn.Linear(256, 8)

    def forward(self, x):
        h = self.down(self.norm(torch.nn.functional.gelu(self.up(x)))) + x
        return self.head(h)


class _Count(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.compiled = 0
        self.fell_back = []

    def emit(self, record):
        if COMPILED in record.getMessage():
            self.compiled += 1
        if FELL_BACK in record.getMessage():
            self.fell_back.append(record.getMessage())


def _train(model, rank, device):
    """STEPS steps of SGD on this rank's own batches; the parameters after them."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(100 * rank + step)
        x, target = torch.randn(16, 256, generator=g).to(device), torch.randn(16, 8, generator=g).to(device)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def _replica(rank, out_dir, collectives):
    # A replica that aborts in native code prints every thread's Python stack first.
    faulthandler.enable(all_threads=True)
    torch.set_num_threads(1)
    device = torch.device("cpu")
    if collectives == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    # A rendezvous through a file, not a TCP port that another process could take meanwhile.
    dist.init_process_group(collectives, init_method=f"file://{os.path.join(out_dir, 'rendezvous')}", rank=rank, world_size=WORLD)
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)
    count = _Count()
    logger = logging.getLogger("tilefuse")
    logger.setLevel(logging.INFO)
    logger.addHandler(count)
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP broadcasts them anyway
    eager = Mlp().to(device)
    compiled = Mlp().to(device)
    compiled.load_state_dict(eager.state_dict())
    # Buckets of 1 MB: Dynamo's DDP optimizer splits the graph at them.
    eager_ddp = torch.nn.parallel.DistributedDataParallel(eager, bucket_cap_mb=1)
    compiled_ddp = torch.nn.parallel.DistributedDataParallel(compiled, bucket_cap_mb=1)
    step = torch.compile(compiled_ddp, backend="tilefuse",
                         options={"backend": "cuda" if device.type == "cuda" else "cpu", "backward": "tilefuse"})
    expected = _train(eager_ddp, rank, device)
    actual = _train(step, rank, device)
    worst = max(((a - e).abs().max() / e.abs().max().clamp_min(1e-12)).item() for a, e in zip(actual, expected))
    gathered = [torch.zeros(sum(p.numel() for p in actual), device=device) for _ in range(WORLD)]
    dist.all_gather(gathered, torch.cat([p.flatten() for p in actual]))
    replicas_apart = (gathered[0] - gathered[1]).abs().max().item()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"worst": worst, "replicas_apart": replicas_apart, "compiled": count.compiled, "fell_back": count.fell_back}, f)
    dist.barrier()
    dist.destroy_process_group()
    # No interpreter teardown: once in CI (2026-12-04) a replica aborted ("terminate called
    # without an active exception", a joinable std::thread destroyed) some 2 s into a run that
    # takes about that long here, most likely at exit; no thread of tilefuse's outlives its
    # call, gloo's do. An abort during the work itself still fails the test (faulthandler
    # prints its stacks).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _collectives_or_skip(collectives):
    if not dist.is_available():
        pytest.skip("this PyTorch has no torch.distributed")
    if collectives == "gloo" and not dist.is_gloo_available():
        pytest.skip("this PyTorch has no gloo")
    if collectives == "nccl":
        if not dist.is_nccl_available():
            pytest.skip("this PyTorch has no NCCL")
        if torch.cuda.device_count() < WORLD:
            pytest.skip(f"NCCL replicas need {WORLD} GPUs; this machine has {torch.cuda.device_count()}")


@pytest.mark.parametrize("collectives", ["gloo", pytest.param("nccl", marks=pytest.mark.cuda)])
def test_two_ddp_replicas_train_through_tilefuse_as_eager_ddp_does(tmp_path, collectives):
    _collectives_or_skip(collectives)
    mp.spawn(_replica, args=(str(tmp_path), collectives), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        # f32, the same ops in another order: a few ulps after three steps on the CPU; on the
        # GPU, cuBLAS's and tilefuse's f32 reductions differ a little more.
        assert result["worst"] < (1e-5 if collectives == "gloo" else 1e-4), result
        assert result["replicas_apart"] == 0.0, "DDP keeps the replicas identical: " + str(result)
        assert not result["fell_back"], result
        # Split at the buckets: more than one forward and one backward graph went through tilefuse.
        assert result["compiled"] > 2, result
