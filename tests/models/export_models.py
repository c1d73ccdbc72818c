"""Exports the small real models tilefuse must import and match, in the ONNX
backend-test layout: NAME/model.onnx + NAME/test_data_set_0/{input,output}_i.pb.

Needs PyTorch (the CPU build is enough), transformers, onnx, onnxruntime and onnxscript
(for the torch.export-based exporter):
    python3 tests/models/export_models.py OUT_DIR
then copy the folders that tests/models/real_models_test.cc lists from OUT_DIR into
tests/models/. Weights are random (fixed seed); expected outputs come from onnxruntime, an
implementation independent of tilefuse. Shapes are static. The exports are deterministic:
a rerun with the same torch/transformers versions writes the same bytes.

The first four (mlp_block, attention_block, gpt2_2layer, llama_2layer) use the legacy
exporter where it works; GPT-2 and LLaMA fall back to the dynamo exporter (transformers'
mask code calls aten::diff, which the legacy exporter lacks at opset 17). Their legacy exports,
gpt2_2layer_legacy and llama_2layer_legacy, skip that code (export_legacy_unpacked).

The zoo (zoo() below: BERT, ViT, T5, ResNet, MobileNetV3 block, U-Net) is exported twice:
NAME with the legacy exporter (dynamo=False, opset 17) and NAME_dynamo with the
torch.export-based one (dynamo=True, opset 18). Both exporters succeed on every zoo model
(torch 2.15, transformers 5.23), and every export is in tests/models: bert_tiny_dynamo indexes
the attention mask with GatherND; the U-Net that goes up by ConvTranspose (unet_convtranspose,
and its dynamo export) imports as a Conv over a zero-dilated input; unet_tiny goes up by Resize
(bilinear + 1x1 Conv, then nearest) instead. bert_sdpa and gpt2_sdpa_dynamo use transformers'
default attention (SDPA), which the exporters write as the "safe" softmax (IsNaN + Where after it).
Exported with torch 2.11 and transformers 5.17 (onnxscript 0.7.2).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

torch.manual_seed(0)
OPSET = 17
DYNAMO_OPSET = 18


class MlpBlock(torch.nn.Module):
    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln(x))))


class AttentionBlock(torch.nn.Module):
    """Pre-LayerNorm causal self-attention written by hand (matmul, mask, softmax)."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return x + self.proj(y.transpose(1, 2).reshape(b, t, d))


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def gpt2(attn_implementation="eager"):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                     attn_implementation=attn_implementation)
    return LogitsOnly(GPT2LMHeadModel(cfg)).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager")
    return LogitsOnly(LlamaForCausalLM(cfg)).eval()


class FirstOutput(torch.nn.Module):
    """Calls a transformers model with keyword inputs and keeps its first output."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *inputs):
        return self.model(**dict(zip(self.names, inputs)), return_dict=False)[0]


def bert(attn_implementation="eager"):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64, attn_implementation=attn_implementation)
    return FirstOutput(BertModel(cfg, add_pooling_layer=False), ["input_ids", "attention_mask"]).eval()


def vit():
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=128, attn_implementation="eager")
    return FirstOutput(ViTModel(cfg, add_pooling_layer=False), ["pixel_values"]).eval()


def t5():
    """A T5 encoder-decoder (one layer each): relative position bias, cross-attention."""
    from transformers import T5Config, T5Model
    cfg = T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_decoder_layers=1,
                   num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=32,
                   decoder_start_token_id=0, attn_implementation="eager")
    return FirstOutput(T5Model(cfg), ["input_ids", "decoder_input_ids"]).eval()


def conv_bn(cin, cout, k=3, stride=1, groups=1):
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                               torch.nn.BatchNorm2d(cout))


def randomize_batchnorm(model):
    """Fresh BatchNorm layers are the identity; give them random statistics (fixed seed)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


class BasicBlock(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = conv_bn(cin, cout, 3, stride)
        self.b = conv_bn(cout, cout, 3)
        self.skip = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else torch.nn.Identity()

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))) + self.skip(x))


class ResNetTiny(torch.nn.Module):
    """ResNet-style: stem Conv+BN+ReLU, MaxPool, three residual blocks, global average pool, Linear.
    The exporters fold a BatchNorm that follows a Conv into it; the final pre-activation-style
    BatchNorm after the last residual add stays a BatchNormalization node."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = conv_bn(3, 8, 3, 2)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.blocks = torch.nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2), BasicBlock(16, 16, 1))
        self.post = torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, classes)

    def forward(self, x):
        x = torch.relu(self.post(self.blocks(self.pool(torch.relu(self.stem(x))))))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class MobileNetV3Block(torch.nn.Module):
    """Inverted residual: 1x1 expand, depthwise 3x3, squeeze-excite (HardSigmoid), 1x1 project;
    HardSwish activations, a residual add."""

    def __init__(self, c=16, expand=48, squeeze=12):
        super().__init__()
        self.expand = conv_bn(c, expand, 1)
        self.depthwise = conv_bn(expand, expand, 3, groups=expand)
        self.se_reduce = torch.nn.Conv2d(expand, squeeze, 1)
        self.se_expand = torch.nn.Conv2d(squeeze, expand, 1)
        self.project = conv_bn(expand, c, 1)

    def forward(self, x):
        act = torch.nn.functional.hardswish
        y = act(self.depthwise(act(self.expand(x))))
        s = torch.nn.functional.adaptive_avg_pool2d(y, 1)
        s = torch.nn.functional.hardsigmoid(self.se_expand(torch.relu(self.se_reduce(s))))
        return x + self.project(y * s)


class UNetTiny(torch.nn.Module):
    """Two levels down (MaxPool), two up, skip connections concatenated. The lower level goes
    up by ConvTranspose (conv_transpose=True) or by Resize (bilinear) and a 1x1 Conv; the upper
    level by Resize (nearest)."""

    def __init__(self, c=8, conv_transpose=False):
        super().__init__()

        def block(cin, cout):
            return torch.nn.Sequential(conv_bn(cin, cout), torch.nn.ReLU(), conv_bn(cout, cout), torch.nn.ReLU())

        self.enc1, self.enc2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        if conv_transpose:
            self.up2 = torch.nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        else:
            self.up2 = torch.nn.Sequential(torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                           torch.nn.Conv2d(4 * c, 2 * c, 1))
        self.dec2 = block(4 * c, 2 * c)
        self.up1 = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.dec1 = block(3 * c, c)
        self.head = torch.nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(torch.nn.functional.max_pool2d(e1, 2))
        m = self.mid(torch.nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


def export_legacy_unpacked(name, model, inputs, input_names, out_dir):
    """The legacy exporter on a transformers decoder, its input taken as one unpacked sequence.

    transformers' mask code looks for several sequences packed into one batch row
    (find_packed_sequence_indices: torch.diff, then a cumsum over booleans). Outside tracing it
    answers None for an unpacked batch, and the masks are the plain causal ones; under the
    legacy exporter it is traced instead, and fails (no aten::diff at opset 17) or, with diff
    written as slices, exports a CumSum over booleans that the ONNX checker refuses. The export
    gets the untraced answer: None."""
    from transformers import masking_utils

    saved = masking_utils.find_packed_sequence_indices
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        folder = os.path.join(out_dir, name)
        os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(model, inputs, path, opset_version=OPSET, dynamo=False, input_names=input_names,
                              output_names=["output"])
    finally:
        masking_utils.find_packed_sequence_indices = saved
    finish(name, folder, path, inputs, input_names)


def export(name, model, inputs, input_names, out_dir, dynamo=False, dynamic_axes=None):
    """dynamo=False: the legacy (TorchScript) exporter, falling back to the dynamo one if it
    fails; dynamo=True: only the torch.export-based exporter. dynamic_axes (legacy exporter):
    symbolic dims, as a deployment export writes them."""
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    kwargs = dict(input_names=input_names, output_names=["output"])
    if dynamic_axes:
        kwargs["dynamic_axes"] = dynamic_axes
    with torch.no_grad():
        if dynamo:
            torch.onnx.export(model, inputs, path, opset_version=DYNAMO_OPSET, dynamo=True, external_data=False,
                              **kwargs)
            return finish(name, folder, path, inputs, input_names)
        try:
            torch.onnx.export(model, inputs, path, opset_version=OPSET, dynamo=False, **kwargs)
        except Exception as e:  # the legacy exporter may be gone: use the dynamo one
            print(f"{name}: legacy exporter failed ({type(e).__name__}: {e}); trying dynamo", flush=True)
            torch.onnx.export(model, inputs, path, opset_version=18, dynamo=True, external_data=False, **kwargs)
    finish(name, folder, path, inputs, input_names)


def finish(name, folder, path, inputs, input_names):
    """Checks the exported model and writes its inputs and onnxruntime's outputs."""
    m = onnx.load(path)
    onnx.checker.check_model(m)
    feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
    outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (n, t) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(t, n), os.path.join(folder, "test_data_set_0", f"input_{i}.pb"))
    for i, (o, out) in enumerate(zip(m.graph.output, outs)):
        onnx.save_tensor(numpy_helper.from_array(out, o.name),
                         os.path.join(folder, "test_data_set_0", f"output_{i}.pb"))
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, ops {ops}", flush=True)


def zoo():
    """(name, factory, inputs, input names) of the model zoo; inputs drawn with a fixed seed."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 128, (1, 16), dtype=torch.int64, generator=g)
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[:, 12:] = 0  # padding at the end
    dec_ids = torch.randint(0, 128, (1, 8), dtype=torch.int64, generator=g)
    image = lambda c, hw: torch.randn(1, c, hw, hw, generator=g)
    return [
        ("bert_tiny", bert, (ids, mask), ["input_ids", "attention_mask"]),
        ("vit_tiny", vit, (image(3, 32),), ["pixel_values"]),
        ("t5_tiny", t5, (ids, dec_ids), ["input_ids", "decoder_input_ids"]),
        ("resnet_tiny", lambda: randomize_batchnorm(ResNetTiny()), (image(3, 32),), ["x"]),
        ("mobilenetv3_block", lambda: randomize_batchnorm(MobileNetV3Block()), (image(16, 16),), ["x"]),
        ("unet_tiny", lambda: randomize_batchnorm(UNetTiny()), (image(3, 32),), ["x"]),
        ("unet_convtranspose", lambda: randomize_batchnorm(UNetTiny(conv_transpose=True)), (image(3, 32),), ["x"]),
        # transformers' default attention (SDPA): the dynamo exporter writes its masked softmax
        # as softmax, IsNaN and Where (fully masked rows give 0), the legacy one similarly.
        ("bert_sdpa", lambda: bert("sdpa"), (ids, mask), ["input_ids", "attention_mask"]),
    ]


def dynamo_only():
    """(name, factory) of models only the dynamo exporter takes: GPT-2 with SDPA (its mask code
    calls aten::diff, which the legacy exporter lacks), causal, on gpt2_2layer's input ids."""
    return [("gpt2_sdpa_dynamo", lambda: gpt2("sdpa"))]


def export_dynamo_only(out_dir, names=None):
    torch.manual_seed(0)
    ids = torch.randint(0, 128, (1, 16), dtype=torch.int64)
    for i, (name, make) in enumerate(dynamo_only()):
        if names is None or name in names:
            torch.manual_seed(100 + i)
            export(name, make(), (ids,), ["input_ids"], out_dir, dynamo=True)


def module_factory(name):
    """The factory of the module exported as tests/models/NAME (any exporter), or None: what
    bench/model_peers.py times in PyTorch beside tilefuse."""
    for suffix in ("_dynamo", "_legacy"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    table = {"mlp_block": lambda: MlpBlock().eval(), "attention_block": lambda: AttentionBlock().eval(),
             "gpt2_2layer": gpt2, "llama_2layer": llama}
    table.update({zoo_name: make for zoo_name, make, _, _ in zoo()})
    table.update({"gpt2_sdpa": make for _, make in dynamo_only()})
    return table.get(name)


def main():
    out_dir = sys.argv[1]
    only = set(sys.argv[2:])  # names to export (default: all)
    if only:
        return export_only(out_dir, only)
    x = torch.randn(2, 16, 64)
    ids = torch.randint(0, 128, (1, 16), dtype=torch.int64)
    export("mlp_block", MlpBlock().eval(), (x,), ["x"], out_dir)
    export("attention_block", AttentionBlock().eval(), (x,), ["x"], out_dir)
    for name, make in (("gpt2_2layer", gpt2), ("llama_2layer", llama)):
        try:
            export(name, make(), (ids,), ["input_ids"], out_dir)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
    export_decoders_legacy(out_dir, ids)
    export_dynamo_only(out_dir)
    export_dynamic(out_dir)
    export_kv_step(out_dir)
    for i, (name, make, inputs, input_names) in enumerate(zoo()):
        torch.manual_seed(i)  # each zoo model's weights independent of the others
        model = make()
        for suffix, dynamo in (("", False), ("_dynamo", True)):
            try:
                export(name + suffix, model, inputs, input_names, out_dir, dynamo=dynamo)
            except Exception as e:
                print(f"{name + suffix}: FAILED {type(e).__name__}: {str(e)[:2000]}", flush=True)



def export_dynamic(out_dir):
    """Models exported with symbolic batch and sequence dims (transformers' deployment exports
    have them): bert_tiny's weights and the legacy exporter, its data set at batch 2 and 24
    tokens, so the dims come from the inputs given (a different shape than bert_tiny's)."""
    torch.manual_seed(0)  # bert_tiny's seed in zoo()
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 128, (2, 24), dtype=torch.int64, generator=g)
    mask = torch.ones(2, 24, dtype=torch.int64)
    mask[1, 20:] = 0
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "output": {0: "batch", 1: "sequence"}}
    export("bert_tiny_dynamic", bert(), (ids, mask), ["input_ids", "attention_mask"], out_dir, dynamic_axes=axes)


def export_kv_step(out_dir):
    """A KV-cache decode step as deployments export one ("decoder with past"; bench/onnx_decode.py
    writes GPT-2's so): GPT-2 with 2 layers of 32 (2 heads of 16), 500 words and 256 positions,
    the cache concatenated, symbolic batch and past (the presents' length `total`), the legacy
    exporter. Its data set is a step at batch 1 after 20 positions."""
    import transformers
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    from onnx_decode import decoder_module

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=500, n_positions=256, n_embd=32, n_layer=2, n_head=2)
    decoder = decoder_module(transformers.GPT2LMHeadModel(cfg).eval(), transformers, torch)
    g = torch.Generator().manual_seed(6)
    token = torch.randint(0, 500, (1, 1), dtype=torch.int64, generator=g)
    past = [torch.randn(1, 2, 20, 16, generator=g) for _ in range(4)]
    past_names = [f"past_{i}_{kv}" for i in range(2) for kv in ("key", "value")]
    present_names = [f"present_{i}_{kv}" for i in range(2) for kv in ("key", "value")]
    name = "gpt2_kv_step_dynamic"
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(decoder, (token, *past), path, opset_version=OPSET, dynamo=False,
                          input_names=["input_ids"] + past_names, output_names=["logits"] + present_names,
                          dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"},
                                        **{n: {0: "batch", 2: "past"} for n in past_names},
                                        **{n: {0: "batch", 2: "total"} for n in present_names}})
    finish(name, folder, path, (token, *past), ["input_ids"] + past_names)


def export_decoders_legacy(out_dir, ids):
    for name, make in (("gpt2_2layer_legacy", gpt2), ("llama_2layer_legacy", llama)):
        try:
            export_legacy_unpacked(name, make(), (ids,), ["input_ids"], out_dir)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {str(e)[:2000]}", flush=True)


def export_only(out_dir, names):
    """Exports just `names` (zoo names with or without _dynamo, or the decoders' _legacy exports),
    the zoo models with the weights and inputs a full run gives them (seeded per model)."""
    if "gpt2_kv_step_dynamic" in names:
        export_kv_step(out_dir)
    if names & {"gpt2_2layer_legacy", "llama_2layer_legacy"}:
        torch.manual_seed(0)
        ids = torch.randint(0, 128, (1, 16), dtype=torch.int64)
        for name, make in (("gpt2_2layer_legacy", gpt2), ("llama_2layer_legacy", llama)):
            if name in names:
                export_legacy_unpacked(name, make(), (ids,), ["input_ids"], out_dir)
    export_dynamo_only(out_dir, names)
    if "bert_tiny_dynamic" in names:
        export_dynamic(out_dir)
    for i, (name, make, inputs, input_names) in enumerate(zoo()):
        wanted = [(suffix, dynamo) for suffix, dynamo in (("", False), ("_dynamo", True)) if name + suffix in names]
        if not wanted:
            continue
        torch.manual_seed(i)
        model = make()
        for suffix, dynamo in wanted:
            export(name + suffix, model, inputs, input_names, out_dir, dynamo=dynamo)


if __name__ == "__main__":
    main()
