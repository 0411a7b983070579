"""Diagnostics for the GPU machine (tools/gpu_check.sh probe): what falls back and why,
what recompiles for new sizes, and where a cold CUDA compile spends its time.

    python tools/gpu_probe.py device-model   # EAGERC_BACKING=cuda: tiny BERT/GPT-2 per-op report
    python tools/gpu_probe.py sizes          # enable("cuda"): compiles per op for each new size
    python tools/gpu_probe.py profile        # cold compile of a few ops under cProfile
    python tools/gpu_probe.py factories      # EAGERC_BACKING=cuda: arange/ones/scalar_tensor
    python tools/gpu_probe.py batchnorm      # EAGERC_BACKING=cuda: BatchNorm training stats
    python tools/gpu_probe.py device-profile # EAGERC_BACKING=cuda: host time per op vs CUDA eager
    python tools/gpu_probe.py glue           # where a GPU wrapper's g++ step spends its time
    python tools/gpu_probe.py refusals       # enable("cuda"): why the coverage run's compile errors fail
    python tools/gpu_probe.py wrappers       # the generated GPU wrappers' sources and g++ commands ($OUT/wrappers.tgz)
    python tools/gpu_probe.py group-norm     # EAGERC_BACKING=cuda: contiguous() strides, DDPM's GroupNorm inputs
    python tools/gpu_probe.py strides        # EAGERC_BACKING=cuda: every op's output strides, native CUDA vs the device

Each mode runs its work in a fresh process with empty eagerc and Inductor caches. Reports
print to stdout; refusals are logged with their whole traceback (eagerc logger at DEBUG).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

DEVICE_MODEL = r"""
import logging, sys, torch, transformers, eagerc
handler = logging.StreamHandler(sys.stderr)
handler.addFilter(lambda r: "not compiled" in r.getMessage())
logging.getLogger("eagerc").addHandler(handler)
logging.getLogger("eagerc").setLevel(logging.DEBUG)
torch.manual_seed(0)
models = {
    "bert": (transformers.BertModel, transformers.BertConfig(hidden_size=64, num_hidden_layers=2,
             num_attention_heads=2, intermediate_size=128, vocab_size=512)),
    "gpt2": (transformers.GPT2Model, transformers.GPT2Config(n_embd=64, n_layer=2, n_head=2,
             vocab_size=512, n_positions=64)),
}
for name, (cls, config) in models.items():
    model = cls(config).eval()
    ids = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        want = model(ids).last_hidden_state
        eagerc.reset_stats()
        got = model.to("eagerc")(ids.to("eagerc")).last_hidden_state.cpu()
    err = (got - want).abs().max().item()
    s = eagerc.stats()
    print(f"== {name}: max abs err {err:.2e}, compiles {s['compiles']}, fallbacks {s['fallbacks']}")
    for op, st in sorted(s["ops"].items()):
        if st["fallbacks"] or st["aliased"]:
            print(f"   {op}: fallbacks {st['fallbacks']} aliased {st['aliased']} {dict(st['fallback_reasons'])}")
"""

# Prepended to the scripts that show kernels' guards.
PRINT_GUARDS = r"""
def print_guards(op_fragment, keep):
    # Each stored kernel of an op whose name holds op_fragment: its signature and the
    # last `keep` characters of its guard source.
    import os
    from kernel_cache.disk import DiskStore
    from kernel_cache.layout import list_namespaces
    root = os.environ["EAGERC_CACHE_DIR"]
    for digest in list_namespaces(root):
        for key, records in DiskStore(root, namespace=digest).items():
            for record in records:
                meta = record["metadata"]
                if op_fragment in meta.get("op", ""):
                    print("GUARD", meta.get("signature"), "\n   ", " ".join(meta.get("guard", "").split())[-keep:])
"""

SIZES = PRINT_GUARDS + r"""
import torch, eagerc
import torch.nn.functional as F
cases = {
    "gelu": lambda x, w: F.gelu(x),
    "tanh": lambda x, w: torch.tanh(x),
    # normalized_shape is an int-list argument, specialized like every other: a new
    # hidden size is a new kernel, new row counts are not (the case varies rows only).
    "layer_norm": lambda x, w: F.layer_norm(x[:, :64].contiguous(), (64,), w[:64], w[:64]),
    "where": lambda x, w: torch.where(x > 0, x, w),
    "mm": lambda x, w: x @ x.t(),
    "cumsum": lambda x, w: torch.cumsum(x, -1),
    "softmax": lambda x, w: torch.softmax(x, -1),
    "sum": lambda x, w: x.sum(1),
}
eagerc.enable("cuda")
for n in (64, 96, 200, 512):
    x = torch.randn(n, n, device="cuda"); w = torch.randn(n, device="cuda")
    row = []
    for name, fn in cases.items():
        before = eagerc.stats()
        fn(x, w)
        after = eagerc.stats()
        new = {op: after["ops"][op]["compiles"] - before["ops"].get(op, {}).get("compiles", 0)
               for op in after["ops"]}
        row.append(f"{name}={sum(new.values())}" + (f"{[o for o, c in new.items() if c]}" if n != 64 and sum(new.values()) else ""))
    print(f"n={n}: " + ", ".join(row))
torch.cuda.synchronize()
# The guards of the kernels that recompiled: what about the size did they pin?
print_guards("layer_norm", 700)
"""

PROFILE = r"""
import cProfile, pstats, time, torch, eagerc
x = torch.randn(64, 64, device="cuda")
t0 = time.perf_counter()
with eagerc.enabled("cuda", ops=["aten::neg"]):
    torch.neg(x)
print(f"first compile of the process: {time.perf_counter() - t0:.2f} s")
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
with eagerc.enabled("cuda", ops=["aten::abs", "aten::add.Tensor", "aten::sigmoid"]):
    torch.abs(x); x + x; torch.sigmoid(x)
torch.cuda.synchronize()
prof.disable()
print(f"three cold compiles: {time.perf_counter() - t0:.2f} s")
stats = pstats.Stats(prof)
stats.sort_stats("cumulative").print_stats(45)
stats.sort_stats("tottime").print_stats(20)
"""

FACTORIES = r"""
import logging, sys, torch, eagerc
logging.basicConfig(stream=sys.stdout, level=logging.WARNING)
logging.getLogger("eagerc").setLevel(logging.DEBUG)
for name, fn in {
    "arange(n)": lambda n: torch.arange(n, device="eagerc"),
    "arange(0, n, dtype=f32)": lambda n: torch.arange(0, n, dtype=torch.float32, device="eagerc"),
    "arange(start, end)": lambda n: torch.arange(2, n + 2, device="eagerc"),
    "ones(n, bool)": lambda n: torch.ones(2, n, dtype=torch.bool, device="eagerc"),
    "scalar_tensor": lambda n: torch.scalar_tensor(float(n), device="eagerc"),
}.items():
    for n in (5, 9):
        got = fn(n).cpu()
        print("RESULT", name, n, got.flatten()[:4].tolist())
s = eagerc.stats()
for op, st in sorted(s["ops"].items()):
    if st["compiles"] or st["fallbacks"] or st["aliased"]:
        print("STATS", op, st["compiles"], st["fallbacks"], st["aliased"], dict(st["fallback_reasons"]))
# Generated Python wrappers that do not parse: the offending lines.
import glob, os
for path in glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.py"), recursive=True):
    text = open(path).read()
    try:
        compile(text, path, "exec")
    except SyntaxError as e:
        lines = text.splitlines()
        print("UNPARSABLE", path, e.lineno, e.msg)
        print("\n".join(f"  {i + 1}: {lines[i]}" for i in range(max(0, e.lineno - 6), min(len(lines), e.lineno + 3))))
"""

BATCHNORM = r"""
import torch, eagerc
from torch import nn
torch.manual_seed(0)
for cls in (nn.BatchNorm2d, nn.BatchNorm1d):
    bn = cls(8).train()
    x = torch.randn(4, 8, 6, 6) if cls is nn.BatchNorm2d else torch.randn(16, 8)
    dev = cls(8).train().to("eagerc")
    for call in ("first (miss)", "second (hit)"):
        y = bn(x)
        before = eagerc.stats()["ops"].get("aten::native_batch_norm@PrivateUse1", {}).get("hits", 0)
        yd = dev(x.to("eagerc"))
        print(cls.__name__, call, "out err", (yd.cpu() - y).abs().max().item())
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            a, b = getattr(bn, name), getattr(dev, name).cpu()
            print("  ", name, "err", (a.double() - b.double()).abs().max().item(), a.flatten()[:3].tolist(), b.flatten()[:3].tolist())
# Override mode on CUDA: the same module on cuda with eagerc serving cuda's ops.
eagerc.enable("cuda")
bn, bc = nn.BatchNorm2d(8).train(), nn.BatchNorm2d(8).train().cuda()
x = torch.randn(4, 8, 6, 6)
for call in ("first", "second"):
    bn(x); bc(x.cuda())
    print("override cuda", call, "running_mean err", (bn.running_mean - bc.running_mean.cpu()).abs().max().item())
eagerc.disable("cuda")
s = eagerc.stats()
for op, st in sorted(s["ops"].items()):
    if "norm" in op and (st["compiles"] or st["fallbacks"] or st["aliased"] or st["hits"]):
        print("STATS", op, st["compiles"], st["hits"], st["fallbacks"], st["aliased"], dict(st["fallback_reasons"]))
"""

DEVICE_PROFILE = PRINT_GUARDS + r"""
import cProfile, pstats, sys, time, torch, transformers, eagerc
from torch.profiler import ProfilerActivity, profile
torch.manual_seed(0)
config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=128, vocab_size=512)
model = transformers.BertModel(config).eval()
ids = torch.randint(0, 512, (1, 16))
sides = {"eagerc": (model.to("eagerc"), ids.to("eagerc"))}
import copy
sides["cuda"] = (copy.deepcopy(model).to("cpu").to("cuda"), ids.to("cuda"))
with torch.no_grad():
    for _ in range(3):
        for m, x in sides.values():
            m(x)
    torch.cuda.synchronize()
    print("compiles after warm-up", eagerc.stats()["compiles"], "fallbacks", eagerc.stats()["fallbacks"])
    eagerc.reset_stats()
    for rnd in range(3):
        for name, (m, x) in sides.items():
            torch.cuda.synchronize(); t0 = time.perf_counter()
            for _ in range(50):
                m(x)
            torch.cuda.synchronize()
            print(f"round {rnd} {name}: {(time.perf_counter() - t0) / 50 * 1e6:.0f} us per forward")
    s = eagerc.stats()
    print("after timing: compiles", s["compiles"], "misses", s["misses"], "fallbacks", s["fallbacks"])
    for op, st in sorted(s["ops"].items(), key=lambda kv: -kv[1]["hits"] - kv[1]["misses"] - kv[1]["aliased"])[:40]:
        print("  ", op, {k: st[k] for k in ("hits", "misses", "fallbacks", "aliased", "interim")})
    for op, st in s["ops"].items():
        if st["fallbacks"]:
            print("REASONS", op, dict(st["fallback_reasons"]))
    # What one more forward's misses do, in eagerc's own words.
    import logging
    handler = logging.StreamHandler(sys.stdout)
    logging.getLogger("eagerc").addHandler(handler)
    logging.getLogger("eagerc").setLevel(logging.DEBUG)
    print("== one forward with eagerc's log")
    sides["eagerc"][0](sides["eagerc"][1])
    logging.getLogger("eagerc").removeHandler(handler)
    logging.getLogger("eagerc").setLevel(logging.WARNING)
    emb = sides["eagerc"][0].embeddings
    for what, t in {"input_ids": sides["eagerc"][1], "position_ids": emb.position_ids[:, :16],
                    "token_type_ids": emb.token_type_ids[:, :16].expand(1, 16)}.items():
        print("INDICES", what, tuple(t.shape), t.stride(), t.storage_offset(), t.data_ptr() % 64, t.dtype)
    print_guards("embedding", 1500)
    for name, (m, x) in sides.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(10):
                m(x)
        print(f"== {name}: self CPU time by op (10 forwards)")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    m, x = sides["eagerc"]
    pr = cProfile.Profile(); pr.enable()
    for _ in range(20):
        m(x)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
"""

GLUE = r"""
import re, shlex, subprocess, time, torch, eagerc
from eagerc.codegen.cpp import wrapper_build as iw
# Each GPU wrapper's compile-and-link command as eagerc runs it, and its time.
records = []
original = iw._build_with
def recording(builder, rewrite, **how):
    command = builder.get_command_line()
    t0 = time.perf_counter()
    try:
        return original(builder, rewrite, **how)
    finally:
        records.append((rewrite(command), time.perf_counter() - t0))
iw._build_with = recording
x = torch.randn(64, 64, device="cuda")
t0 = time.perf_counter()
with eagerc.enabled("cuda", ops=["aten::neg"]):
    torch.neg(x)
print(f"first compile of the process: {time.perf_counter() - t0:.2f} s")
for op, fn in {"aten::abs": lambda: torch.abs(x), "aten::add.Tensor": lambda: x + x,
               "aten::sigmoid": lambda: torch.sigmoid(x), "aten::_softmax": lambda: torch.softmax(x, -1),
               "aten::sum.dim_IntList": lambda: x.sum(1)}.items():
    t0 = time.perf_counter()
    with eagerc.enabled("cuda", ops=[op]):
        fn()
    torch.cuda.synchronize()
    print(f"cold compile {op}: {time.perf_counter() - t0:.2f} s, of which g++ {records[-1][1]:.2f} s")
def timed(command):
    t0 = time.perf_counter()
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    return time.perf_counter() - t0, done
command = records[-1][0]
print("COMMAND", command)
pch = re.search(r"-include\s+(\S+)", command)
variants = {"as built": command, "-O0": re.sub(r"(?<!\S)-O1(?!\S)", "-O0", command),
            "no precompiled header": command.replace(pch.group(0), "") if pch else None,
            "no debug info": re.sub(r"(?<!\S)-g\d?(?!\S)", "", command),
            "-fsyntax-only": command + " -fsyntax-only"}
for name, cmd in variants.items():
    if cmd is None:
        print(f"{name}: (no -include in the command)")
        continue
    runs = sorted(timed(cmd)[0] for _ in range(3))
    print(f"{name}: {runs[1]:.3f} s (median of 3)")
seconds, done = timed(command + " -H")
used = [l for l in done.stderr.splitlines() if l.startswith(("!", "x"))]
print("precompiled header lines (! = used, x = invalid):", used[:5], "headers read:", done.stderr.count("\n. "))
seconds, done = timed(command + " -ftime-report")
print("\n".join(l for l in done.stderr.splitlines()
                if re.search(r"\d+\.\d+ \(\s*\d+%\)", l) and not re.search(r"\(\s*[0-2]%\) wall", l))[:3000])
"""

REFUSALS = r"""
import logging, re, sys, torch, eagerc
import torch.nn.functional as F
# Every refusal with its cause; a C++ compile error with its first error lines.
class Short(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "not compiled" not in text and "Inductor failed" not in text:
            return
        errors = [l for l in text.splitlines() if "error:" in l][:4]
        print("   LOG", text.splitlines()[0][:300])
        for l in errors:
            print("      ", l.strip()[:300])
logging.getLogger("eagerc").addHandler(Short())
logging.getLogger("eagerc").setLevel(logging.DEBUG)
torch.manual_seed(0)
d = "cuda"
cases = {
    "arange.start_out": lambda: torch.arange(0, 5, 1, out=torch.empty(5, device=d)),
    "eye.m_out": lambda: torch.eye(3, 4, out=torch.empty(3, 4, device=d)),
    "addbmm": lambda: torch.addbmm(torch.randn(5, 10, device=d), torch.randn(5, 5, 5, device=d), torch.randn(5, 5, 10, device=d)),
    "linalg_solve_triangular": lambda: torch.linalg.solve_triangular(torch.randn(3, 3, device=d).triu() + 3 * torch.eye(3, device=d), torch.randn(3, 1, device=d), upper=True),
    "max_pool3d_with_indices": lambda: F.max_pool3d(torch.randn(1, 2, 3, 6, 5, device=d), (3, 3, 3), (2, 2, 2), (0, 0, 0), (1, 2, 1), True, True),
    "index_put accumulate": lambda: torch.zeros(5, 5, device=d).index_put_((torch.tensor([1, 1], device=d),), torch.ones(2, 5, device=d), accumulate=True),
    "mul_.Scalar": lambda: torch.randn(5, 5, device=d).mul_(1.5),
    "special_zeta": lambda: torch.special.zeta(torch.rand(5, device=d) + 1.5, torch.rand(5, device=d) + 1),
    "remainder.Scalar": lambda: torch.remainder(torch.arange(25, device=d).view(5, 5), 5),
}
for name, fn in cases.items():
    print("==", name)
    before = eagerc.stats()
    try:
        torch.manual_seed(0)
        with eagerc.enabled("cuda"):
            got = fn()
        torch.manual_seed(0)
        want = fn()
        ok = all(torch.allclose(a.float(), b.float(), atol=1e-4, rtol=1e-4, equal_nan=True)
                 for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)))
        print("   result matches native CUDA:", ok)
    except Exception as e:
        print("   RAISED", type(e).__name__, str(e)[:300])
    after = eagerc.stats()
    for op, st in after["ops"].items():
        was = before["ops"].get(op, {})
        moved = {k: st[k] - was.get(k, 0) for k in ("hits", "misses", "compiles", "fallbacks")}
        if any(moved.values()):
            print("   STATS", op, moved, list(st["fallback_reasons"])[:1])
# Buffers whose shape ATen's CPU and CUDA kernels disagree on (the coverage run's two
# 'mismatches' against CPU eager): what native CUDA returns.
x = torch.randn(5)
print("log_sigmoid_forward buffer: cpu", tuple(torch.ops.aten.log_sigmoid_forward(x)[1].shape),
      "cuda", tuple(torch.ops.aten.log_sigmoid_forward(x.cuda())[1].shape))
args = [torch.randn(3, 2, 4), torch.randn(2), torch.randn(2), torch.randn(2), torch.rand(2) + 0.5]
print("native_batch_norm eval save_mean: cpu", tuple(torch.ops.aten.native_batch_norm(*args, False, -1.2, 1e-5)[1].shape),
      "cuda", tuple(torch.ops.aten.native_batch_norm(*[a.cuda() for a in args], False, -1.2, 1e-5)[1].shape))
"""

WRAPPERS = r"""
import logging, os, re, shutil, sys, tarfile, time, torch, eagerc
import torch.nn.functional as F
from eagerc.codegen.cpp import glue_prelude, wrapper_build as iw
# Why a wrapper did not build on eagerc's lean header (glue_prelude logs it at DEBUG).
handler = logging.StreamHandler(sys.stdout)
handler.addFilter(lambda r: "wrapper header could not build" in r.getMessage())
logging.getLogger("eagerc").addHandler(handler)
logging.getLogger("eagerc").setLevel(logging.DEBUG)
# Every GPU wrapper eagerc builds: its source, its PCH header and its g++ command, for
# studying what the g++ step costs away from the GPU machine.
out = os.path.join(os.environ.get("OUT", "/tmp"), "wrappers")
os.makedirs(out, exist_ok=True)
built = []
original = iw._build_with
def recording(builder, rewrite, **how):
    command = rewrite(builder.get_command_line())
    t0 = time.perf_counter()
    try:
        return original(builder, rewrite, **how)
    finally:
        built.append((command, time.perf_counter() - t0))
iw._build_with = recording
x = torch.randn(64, 64, device="cuda")
cases = {"abs": lambda: torch.abs(x), "add_alpha": lambda: torch.add(x, x, alpha=2),
         "sum_dim": lambda: x.sum(1), "softmax": lambda: torch.softmax(x, -1),
         "layer_norm": lambda: F.layer_norm(x, (64,)), "mm": lambda: x @ x,
         "where": lambda: torch.where(x > 0, x, x * 2), "cumsum": lambda: x.cumsum(1),
         "addmm": lambda: torch.addmm(x, x, x), "embedding": lambda: F.embedding(torch.tensor([1, 2], device="cuda"), x)}
for name, fn in cases.items():
    start = len(built)
    t0 = time.perf_counter()
    with eagerc.enabled("cuda"):
        fn()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    for i, (command, took) in enumerate(built[start:]):
        source = glue_prelude.source_file(command)
        if source is None:  # a link step (CPU builds): no source of its own
            continue
        pch = re.search(r"-include\s+(\S+)", command)
        shutil.copy(source, f"{out}/{name}_{i}.cpp")
        if pch and os.path.exists(pch.group(1)):
            shutil.copy(pch.group(1), f"{out}/pch_{os.path.basename(pch.group(1))}")
        with open(f"{out}/{name}_{i}.cmd", "w") as f:
            f.write(command + "\n")
        print(f"{name}: {seconds:.2f} s in all, wrapper {i} g++ {took:.2f} s, builds so far {glue_prelude.counts}")
with tarfile.open(out + ".tgz", "w:gz") as tar:
    tar.add(out, arcname="wrappers")
shutil.rmtree(out)
"""

# The tiny DDPM pipeline on GPU memory raised "Expected X.is_contiguous(memory_format)" in
# its mid block's first GroupNorm (CUDA's native_group_norm wants a contiguous X; torch's
# composite group_norm makes X contiguous for any non-CPU device): what strides reach it?
GROUP_NORM = r"""
import sys, traceback, torch, eagerc
sys.path.insert(0, "tests")
for shape, order in [((2, 8, 4, 4), (0, 2, 3, 1)), ((1, 16, 4, 4), (0, 2, 3, 1))]:
    x = torch.randn(shape).permute(*order).contiguous().permute(0, 3, 1, 2)
    d = x.to("eagerc")
    c = d.contiguous()
    print("contiguous()", tuple(d.shape), d.stride(), "->", c.stride(), c.is_contiguous(),
          "equal", torch.equal(c.cpu(), x.contiguous()))
from test_device_generators import tiny_ddpm_pipeline
pipe = tiny_ddpm_pipeline()
def show(module, args):
    x = args[0]
    print(type(module).__name__, tuple(x.shape), x.stride(), "contiguous", x.is_contiguous())
for m in pipe.unet.modules():
    if isinstance(m, torch.nn.GroupNorm):
        m.register_forward_pre_hook(show)
pipe = pipe.to("eagerc")
try:
    pipe(generator=torch.Generator("eagerc").manual_seed(0), num_inference_steps=2, output_type="np")
    print("ddpm ok")
except Exception:
    traceback.print_exc()
"""

# Every op's output strides (size-1 dims included: c10 reads them to suggest a memory format,
# and group_norm makes its input contiguous in that format) in the tiny DDPM pipeline and
# its UNet alone, on native CUDA and on the eagerc device on GPU memory (kernels compiled
# before they answer, EAGERC_COMPILE=now): the first ops whose strides differ.
STRIDES = r"""
import difflib, sys, torch, eagerc
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
sys.path.insert(0, "tests")
from test_device_generators import tiny_ddpm_pipeline

class Layouts(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.log = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        layouts = lambda v: [(tuple(t.shape), t.stride()) for t in tree_flatten(v)[0] if isinstance(t, torch.Tensor)]
        self.log.append((str(func), layouts((args, kwargs)), layouts(out)))
        return out

def record(device, run):
    # A first run outside the mode compiles (a dispatch mode's calls compile nothing).
    run(device)
    with Layouts() as mode:
        run(device)
    torch.cuda.synchronize()
    return mode.log

def pipeline(batch):
    pipe = tiny_ddpm_pipeline()
    def run(device):
        pipe.to(device)
        pipe(batch_size=batch, generator=torch.Generator(device).manual_seed(0), num_inference_steps=2, output_type="pt")
    return run

def unet(device):
    model = tiny_ddpm_pipeline().unet.to(device)
    with torch.no_grad():
        model(torch.randn(1, 3, 8, 8).to(device), 3)

def diff(name, want, got, limit=8):
    ops = difflib.SequenceMatcher(None, [w[0] for w in want], [g[0] for g in got], autojunk=False)
    pairs = [(want[i + k], got[j + k]) for i, j, n in ops.get_matching_blocks() for k in range(n)]
    bad = [(w, g) for w, g in pairs if w[2] != g[2]]
    print(f"== {name}: {len(want)} ops on cuda, {len(got)} on eagerc, {len(bad)} with other output strides")
    for w, g in bad[:limit]:
        print("  ", w[0], "inputs", w[1], "\n      cuda  ", w[2], "\n      eagerc", g[2], "(inputs", g[1], ")")

torch.manual_seed(0)
for name, run in (("unet", unet), ("pipeline batch 1", pipeline(1)), ("pipeline batch 2", pipeline(2))):
    try:
        want = record("cuda", run)
        got = record("eagerc", run)
        diff(name, want, got)
    except Exception as e:
        print("==", name, "RAISED", type(e).__name__, str(e)[:400])
x = torch.as_strided(torch.randn(256, device="cuda"), (1, 16, 4, 4), (16, 1, 64, 16))
d = torch.as_strided(x.clone().to("eagerc"), (1, 16, 4, 4), (16, 1, 64, 16))
print("x / 2 of (1, 16, 4, 4) strides (16, 1, 64, 16): cuda", (x / 2).stride(), "eagerc", (d / 2).stride())
s = eagerc.stats()
for op, st in sorted(s["ops"].items()):
    if "group_norm" in op or st["fallbacks"] or st["aliased"]:
        print("STATS", op, {k: st[k] for k in ("hits", "compiles", "fallbacks", "aliased", "interim")}, dict(st["fallback_reasons"]))
"""

SCRIPTS = {"device-profile": DEVICE_PROFILE, "device-model": DEVICE_MODEL, "sizes": SIZES, "profile": PROFILE,
           "factories": FACTORIES, "batchnorm": BATCHNORM, "glue": GLUE, "refusals": REFUSALS,
           "wrappers": WRAPPERS, "group-norm": GROUP_NORM, "strides": STRIDES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=sorted(SCRIPTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as fresh:
        env = dict(os.environ, EAGERC_CACHE_DIR=f"{fresh}/eagerc",
                   TORCHINDUCTOR_CACHE_DIR=f"{fresh}/inductor")
        if args.what in ("device-model", "factories", "batchnorm", "device-profile", "group-norm", "strides"):
            env["EAGERC_BACKING"] = "cuda"
        if args.what == "strides":
            env["EAGERC_COMPILE"] = "now"  # compiled kernels answer, not the interim's CUDA kernels
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPTS[args.what])], env=env)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
