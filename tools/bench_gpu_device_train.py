"""The eagerc device on GPU memory against native CUDA (run on the GPU machine): a training
step, and torch.compile's first forward and steady state.

    python tools/bench_gpu_device_train.py train [--models bert,gpt2,resnet50] [--batch 8]
    python tools/bench_gpu_device_train.py compile [--models ...] [--batch 1]

train: forward, loss, backward and an AdamW step of the same model (dropout off, so both
sides compute the same thing) on the device (EAGERC_BACKING=cuda) and on CUDA, one process,
medians over alternating rounds; the parameters of both sides after all steps are
compared. compile: torch.compile(model) on the device and on CUDA, the first forward in a
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


def bench_train(args) -> None:
    print(f"{'model':<10} {'batch':>5} {'native ms':>10} {'device ms':>10} {'ratio':>6} "
          f"{'param err':>9} {'compiles':>8} {'fallbacks':>9}")
    for name in args.models.split(","):
        sides = {}
        for device in ("cuda", "eagerc"):
            model, inputs = build(name, args.batch, "cuda")
            model = model.train().to(device)
            inputs = {k: v.to(device) for k, v in inputs.items()}
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

            def step(model=model, inputs=inputs, opt=opt):
                opt.zero_grad(set_to_none=True)
                _first(model(**inputs)).float().pow(2).mean().backward()
                opt.step()

            sides[device] = (model, step)
        eagerc.reset_stats()
        for _ in range(2):  # the device compiles what it misses
            sides["cuda"][1]()
            sides["eagerc"][1]()
        compiles = eagerc.stats()["compiles"]
        nat, dev = _alternate(sides["cuda"][1], sides["eagerc"][1], args.rounds, args.inner)
        stats = eagerc.stats()
        fallbacks = sum(v["fallbacks"] for v in stats["ops"].values())
        err = max((p.detach() - q.detach().to("cuda")).abs().max().item()
                  for p, q in zip(sides["cuda"][0].parameters(), sides["eagerc"][0].parameters()))
        print(f"{name:<10} {args.batch:>5} {nat:>10.2f} {dev:>10.2f} {dev / nat:>6.2f} {err:>9.1e} "
              f"{compiles:>8} {fallbacks:>9}", flush=True)
        if stats["compiles"] != compiles:
            print(f"   {stats['compiles'] - compiles} compiles in the timed steps")


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
    parser.add_argument("what", choices=["train", "compile", "first-forward"])
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--device", default="eagerc", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.what != "first-forward":
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
              f"EAGERC_BACKING={os.environ.get('EAGERC_BACKING')}")
    {"train": bench_train, "compile": bench_compile, "first-forward": _first_forward_child}[args.what](args)


if __name__ == "__main__":
    main()
