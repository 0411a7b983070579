"""Training step time: eager, torch.compile and eagerc.capture, side by side (issue 30's
target: a captured training step at least as fast as torch.compile's on BERT, GPT-2 and
ResNet-50 on the GPU machine).

    python tools/bench_capture_train.py                        # base sizes, cuda if present
    python tools/bench_capture_train.py --size tiny --iters 3 --rounds 3   # a CPU check
    python tools/bench_capture_train.py --models resnet50 --batch 32

One step is optimizer.zero_grad(), the forward (the mode's callable), a loss, backward and
an SGD step (outside the captured or compiled call, as a user writes it). Each mode trains
its own copy of the model (same initial weights, dropout off so the first losses compare):
eager; torch.compile(model) (Inductor, default options); eagerc.capture(model) (Inductor
through eagerc's compile/cache layer, forward and backward via AOTAutograd). After warm-up
steps (compiles), rounds alternate between the modes (each round times `iters` steps,
synchronized on cuda); the table gives medians per step and the ratio to eager's time
(< 1: faster than eager), the first step's loss of each mode against eager's
(eagerc.testing's model tolerance) and capture's graph counts.
"""
import argparse
import copy
import statistics
import sys
import time

import torch


def _no_dropout(model):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0


def make(name, size, batch, device):
    """(model, make_inputs, loss_of)."""
    import transformers as T
    torch.manual_seed(0)
    tiny = size == "tiny"
    if name == "bert":
        cfg = T.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, vocab_size=100) if tiny else T.BertConfig()
        model, seq = T.BertForSequenceClassification(cfg), 16 if tiny else 128
        vocab = cfg.vocab_size

        def inputs():
            return (torch.randint(0, vocab, (batch, seq), device=device),)
        loss = lambda out: out.logits.float().pow(2).mean()  # noqa: E731
    elif name == "gpt2":
        cfg = T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, bos_token_id=0,
                           eos_token_id=0) if tiny else T.GPT2Config()
        model, seq = T.GPT2LMHeadModel(cfg), 16 if tiny else 128
        vocab = cfg.vocab_size

        def inputs():
            return (torch.randint(0, vocab, (batch, seq), device=device),)
        loss = lambda out: out.logits.float().pow(2).mean()  # noqa: E731
    elif name == "resnet50":
        cfg = T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                             num_labels=10) if tiny else T.ResNetConfig(num_labels=1000)
        model, side = T.ResNetForImageClassification(cfg), 32 if tiny else 224

        def inputs():
            return (torch.randn(batch, 3, side, side, device=device),)
        loss = lambda out: out.logits.float().pow(2).mean()  # noqa: E731
    else:
        raise ValueError(f"unknown model {name!r}: bert, gpt2, resnet50")
    model = model.to(device).train()
    _no_dropout(model)
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop",
              "embd_pdrop", "attn_pdrop"):
        if hasattr(model.config, k):
            setattr(model.config, k, 0.0)
    return model, inputs, loss


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Mode:
    def __init__(self, name, model, wrap, loss_of):
        self.name, self.model, self.loss_of = name, model, loss_of
        self.fn = wrap(model)
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        self.times = []
        self.first_loss = None
        self.first_s = None

    def step(self, inputs):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_of(self.fn(*inputs))
        loss.backward()
        self.opt.step()
        return loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,gpt2,resnet50")
    ap.add_argument("--size", choices=["tiny", "base"], default="base")
    ap.add_argument("--batch", type=int, default=None, help="default: 8 (text), 32 (resnet50)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--iters", type=int, default=10, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", default="eager,compile,capture")
    args = ap.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    from eagerc.capture import capture, capture_stats
    from eagerc.testing import assert_close

    wraps = {"eager": lambda m: m, "compile": torch.compile, "capture": capture}
    machine = (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
               else f"CPU ({torch.get_num_threads()} threads)")
    print(f"# training step, {args.size} models, device {args.device}: {machine}; torch "
          f"{torch.__version__}; {args.rounds} rounds x {args.iters} steps, medians\n")
    rows = []
    for name in args.models.split(","):
        batch = args.batch or (32 if name == "resnet50" else 8)
        if args.size == "tiny" and args.batch is None:
            batch = 2
        model, inputs, loss_of = make(name, args.size, batch, args.device)
        modes = [Mode(m, copy.deepcopy(model), wraps[m], loss_of)
                 for m in args.modes.split(",")]
        del model
        torch.manual_seed(1)
        batches = [inputs() for _ in range(4)]
        for mode in modes:  # warm-up: compiles; the first step's loss is compared
            for i in range(args.warmup):
                _sync(args.device)
                t = time.perf_counter()
                loss = mode.step(batches[i % len(batches)])
                _sync(args.device)
                if i == 0:
                    mode.first_loss, mode.first_s = loss.detach().cpu(), time.perf_counter() - t
            print(f"# {name} {mode.name}: warm-up done ({mode.first_s:.1f} s first step)",
                  file=sys.stderr, flush=True)
        for _ in range(args.rounds):
            for mode in modes:
                _sync(args.device)
                t = time.perf_counter()
                for i in range(args.iters):
                    mode.step(batches[i % len(batches)])
                _sync(args.device)
                mode.times.append((time.perf_counter() - t) / args.iters * 1e3)
        ref = next((m for m in modes if m.name == "eager"), None)
        row = {"model": name, "batch": batch}
        for mode in modes:
            med = statistics.median(mode.times)
            row[mode.name] = med
            row[mode.name + "_first_s"] = mode.first_s
            if ref is not None and mode is not ref:
                try:
                    assert_close(mode.first_loss, ref.first_loss, model=True)
                    row[mode.name + "_loss"] = "equal"
                except AssertionError:
                    row[mode.name + "_loss"] = (f"differs ({mode.first_loss.item():.6g} vs "
                                                f"{ref.first_loss.item():.6g})")
            if mode.name == "capture":
                s = capture_stats(mode.fn)
                row["capture_stats"] = (f"records {s['records']}, training graphs "
                                        f"{s['training_graphs']}, eager runs "
                                        f"{s['eager_runs']}, from disk "
                                        f"{s['graphs_from_disk']}"
                                        + (f", stops {s['stop_reasons']}"
                                           if s["stop_reasons"] else ""))
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    print(table(rows, args.modes.split(",")))


def table(rows, modes):
    head = ["model", "batch"] + [f"{m} ms/step" for m in modes] + \
        [f"{m} / eager" for m in modes if m != "eager"] + \
        [f"{m} / compile" for m in modes if m == "capture" and "compile" in modes] + \
        ["first step s (" + ", ".join(modes) + ")", "first loss vs eager", "capture"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], str(r["batch"])] + [f"{r[m]:.2f}" for m in modes]
        if "eager" in modes:
            cells += [f"{r[m] / r['eager']:.2f}x" for m in modes if m != "eager"]
        else:
            cells += ["–" for m in modes if m != "eager"]
        if "capture" in modes and "compile" in modes:
            cells.append(f"{r['capture'] / r['compile']:.2f}x")
        cells.append(", ".join(f"{r[m + '_first_s']:.1f}" for m in modes))
        cells.append(", ".join(f"{m}: {r[m + '_loss']}" for m in modes if m + "_loss" in r))
        cells.append(r.get("capture_stats", "–"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
