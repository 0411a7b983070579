"""The eagerc device on GPU memory against native CUDA (run on the GPU machine): a training
step, and torch.compile's first forward and steady state.

    python tools/bench_gpu_device_train.py train [--models bert,gpt2,resnet50] [--batch 8] [--profile]
    python tools/bench_gpu_device_train.py compile [--models ...] [--batch 1]

train: forward, loss, backward and an AdamW step of the same model (dropout off, so both
sides compute the same thing) on the device (EAGERC_BACKING=cuda) and on CUDA, each side in
processes of its own, alternating (native CUDA backward cannot run in a process where the
device is registered: see _train_child); medians; the parameters of both sides after all
steps are compared. compile: torch.compile(model) on the device and on CUDA, the first forward in a
fresh process with empty Inductor and eagerc caches (two processes each, alternating),
then the compiled forwards' steady state, alternating rounds in one process. TF32 off.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__":
    os.environ.setdefault("EAGERC_BACKING", "cuda")  # chosen before eagerc is imported

import torch

import eagerc  # noqa: F401  (registers the device)


def build(name: str, batch: int, device: str):
    import transformers

    torch.manual_seed(0)
    if name == "bert":
        model = transformers.BertModel(transformers.BertConfig(
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
        inputs = {"input_ids": torch.randint(0, 30000, (batch, 128))}
    elif name == "gpt2":
        model = transformers.GPT2Model(transformers.GPT2Config(
            use_cache=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        inputs = {"input_ids": torch.randint(0, 50000, (batch, 128))}
    elif name == "resnet50":
        model = transformers.ResNetModel(transformers.ResNetConfig())
        inputs = {"pixel_values": torch.randn(batch, 3, 224, 224)}
    else:
        raise ValueError(name)
    return model.to(device), {k: v.to(device) for k, v in inputs.items()}


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))


def _ms(fn, inner: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / inner


def _alternate(a, b, rounds: int, inner: int):
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(_ms(a, inner))
        tb.append(_ms(b, inner))
    return statistics.median(ta), statistics.median(tb)


def _train_child(args) -> None:
    """One side's training steps (--device cuda or eagerc) in a process of its own: on a
    CUDA machine a registered PrivateUse1 device is torch's accelerator, and the autograd
    engine then has no stream for CUDA tensors (native CUDA backward fails in a process
    where the device is registered). Prints the median step time; saves the parameters."""
    model, inputs = build(args.models, args.batch, "cuda")
    model = model.train().to(args.device)
    inputs = {k: v.to(args.device) for k, v in inputs.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        _first(model(**inputs)).float().pow(2).mean().backward()
        opt.step()

    for _ in range(2):  # the device compiles what it misses
        step()
    if args.device == "eagerc" and not eagerc.wait_compiles(timeout=900):
        sys.exit("the compile service did not finish in 900 s")
    step()  # loads what the background compiles left in the cache
    compiles = eagerc.stats()["compiles"] if args.device == "eagerc" else 0
    times = [_ms(step, args.inner) for _ in range(args.rounds)]
    stats = eagerc.stats() if args.device == "eagerc" else None
    fallbacks = sum(v["fallbacks"] for v in stats["ops"].values()) if stats else 0
    torch.save([p.detach().to("cpu") for p in model.parameters()], args.save)
    if args.profile:
        _profile(step, args.device)
    print(f"STEP {statistics.median(times):.3f} {compiles} {fallbacks} "
          f"{(stats['compiles'] - compiles) if stats else 0}")


def _profile(step, device: str) -> None:
    """Where one side's step time goes: the GPU kernels and the CPU ops of three steps,
    most device time first (to stderr; the parent prints it with --profile)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    table = prof.key_averages()
    print(f"== {device}: by GPU time", file=sys.stderr)
    print(table.table(sort_by="self_device_time_total", row_limit=25, max_name_column_width=60),
          file=sys.stderr)
    print(f"== {device}: by CPU time", file=sys.stderr)
    print(table.table(sort_by="self_cpu_time_total", row_limit=20, max_name_column_width=60),
          file=sys.stderr)


def bench_train(args) -> None:
    """Native CUDA and the device alternate by process (two each); parameters compared."""
    print(f"{'model':<10} {'batch':>5} {'native ms':>10} {'device ms':>10} {'ratio':>6} "
          f"{'param err':>9} {'compiles':>8} {'fallbacks':>9}")
    for name in args.models.split(","):
        times = {"cuda": [], "eagerc": []}
        extra = ""
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(2):
                for device in ("cuda", "eagerc"):
                    env = dict(os.environ, EAGERC_DEVICE="0" if device == "cuda" else "1")
                    out = subprocess.run([sys.executable, __file__, "train-child", "--models", name,
                                          "--batch", str(args.batch), "--device", device,
                                          "--rounds", str(args.rounds), "--inner", str(args.inner),
                                          "--save", f"{tmp}/{device}.pt"]
                                         + (["--profile"] if args.profile and not times[device] else []),
                                         env=env, capture_output=True, text=True)
                    line = [l for l in out.stdout.splitlines() if l.startswith("STEP")]
                    if not line:
                        print(f"{name}: training on {device} failed:\n{out.stderr[-3000:]}")
                        return
                    if args.profile and not times[device]:
                        print(out.stderr[out.stderr.find("== "):], flush=True)
                    ms, compiles, fallbacks, late = line[0].split()[1:]
                    times[device].append(float(ms))
                    if device == "eagerc":
                        extra = (compiles, fallbacks, late)
            err = max((p - q).abs().max().item() for p, q in
                      zip(torch.load(f"{tmp}/cuda.pt"), torch.load(f"{tmp}/eagerc.pt")))
        nat, dev = statistics.median(times["cuda"]), statistics.median(times["eagerc"])
        print(f"{name:<10} {args.batch:>5} {nat:>10.2f} {dev:>10.2f} {dev / nat:>6.2f} {err:>9.1e} "
              f"{extra[0]:>8} {extra[1]:>9}   (processes: native {times['cuda']}, device "
              f"{times['eagerc']}; compiles in timed steps {extra[2]})", flush=True)


def _first_forward_child(args) -> None:
    model, inputs = build(args.models, args.batch, "cuda")
    model = model.eval().to(args.device)
    inputs = {k: v.to(args.device) for k, v in inputs.items()}
    compiled = torch.compile(model)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(**inputs)
    torch.cuda.synchronize()
    print(f"FIRST {time.perf_counter() - t0:.3f}")


def bench_compile(args) -> None:
    print(f"{'model':<10} {'batch':>5} {'first cuda s':>12} {'first dev s':>11} "
          f"{'cuda ms':>8} {'device ms':>9} {'ratio':>6} {'max err':>8}")
    for name in args.models.split(","):
        first = {"cuda": [], "eagerc": []}
        for _ in range(2):
            for device in ("cuda", "eagerc"):
                with tempfile.TemporaryDirectory() as tmp:
                    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
                               EAGERC_CACHE_DIR=f"{tmp}/eagerc", TRITON_CACHE_DIR=f"{tmp}/triton")
                    out = subprocess.run([sys.executable, __file__, "first-forward", "--models", name,
                                          "--batch", str(args.batch), "--device", device],
                                         env=env, capture_output=True, text=True)
                    line = [l for l in out.stdout.splitlines() if l.startswith("FIRST")]
                    if not line:
                        print(f"{name}: first forward on {device} failed:\n{out.stderr[-3000:]}")
                        return
                    first[device].append(float(line[0].split()[1]))
        model, inputs = build(name, args.batch, "cuda")
        model = model.eval()
        on_device = build(name, args.batch, "cuda")[0].eval().to("eagerc")
        on_device.load_state_dict(model.state_dict())
        device_inputs = {k: v.to("eagerc") for k, v in inputs.items()}
        native_c, device_c = torch.compile(model), torch.compile(on_device)
        with torch.no_grad():
            want = _first(native_c(**inputs))
            got = _first(device_c(**device_inputs))
            err = (got.to("cuda") - want).abs().max().item()
            nat, dev = _alternate(lambda: native_c(**inputs), lambda: device_c(**device_inputs),
                                  args.rounds, args.inner)
        print(f"{name:<10} {args.batch:>5} {statistics.median(first['cuda']):>12.2f} "
              f"{statistics.median(first['eagerc']):>11.2f} {nat:>8.2f} {dev:>9.2f} {dev / nat:>6.2f} "
              f"{err:>8.1e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["train", "compile", "first-forward", "train-child"])
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--device", default="eagerc", help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true",
                        help="train: print each side's profile (GPU kernels, CPU ops) once")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.what not in ("first-forward", "train-child"):
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
              f"EAGERC_BACKING={os.environ.get('EAGERC_BACKING')}")
    {"train": bench_train, "compile": bench_compile, "first-forward": _first_forward_child,
     "train-child": _train_child}[args.what](args)


if __name__ == "__main__":
    main()
