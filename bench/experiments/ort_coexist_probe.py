"""Diagnostic: a tilefuse model's call time with an onnxruntime session in the same process."""
import os, sys, time, statistics
import onnxruntime as ort
import tilefuse
from tilefuse._bench import _random_inputs
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_load import model_path, timed_ms  # noqa: E402
path = model_path(sys.argv[1] if len(sys.argv) > 1 else "matmul_bias_relu")
m = tilefuse.compile(path, backend="cpu")
x = _random_inputs(m.inputs, 0)
def med(f, k=300):
    for _ in range(20): f()
    return statistics.median(timed_ms(f, k))
print("no session:", round(med(lambda: m(*x)), 4), flush=True)
def session(spin):
    o = ort.SessionOptions(); o.intra_op_num_threads = os.cpu_count(); o.inter_op_num_threads = 1
    if not spin: o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    from tilefuse._bench import _onnx_bytes_or_path
    return ort.InferenceSession(_onnx_bytes_or_path(path), o, providers=["CPUExecutionProvider"])
s = session(True)
feeds = {i.name: a for i, a in zip(s.get_inputs(), x)}
print("session made, not run:", round(med(lambda: m(*x)), 4), flush=True)
print("ort alone:", round(med(lambda: s.run(None, feeds)), 4), flush=True)
print("right after ort:", round(med(lambda: m(*x)), 4), flush=True)
time.sleep(1)
print("1 s after ort:", round(med(lambda: m(*x)), 4), flush=True)
del s
s = session(False)
print("ort no-spin:", round(med(lambda: s.run(None, feeds)), 4), flush=True)
print("after ort no-spin:", round(med(lambda: m(*x)), 4), flush=True)
