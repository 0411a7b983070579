"""Command line: ``python -m eagerc demo`` runs a real model on compiled kernels;
``python -m eagerc warm MODULE:FACTORY`` compiles a model's kernels ahead of time."""
from __future__ import annotations

import argparse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eagerc", description=__doc__.replace("``", ""))
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a model with compiled kernels, cold then warm")
    demo.add_argument("--device", default=None, help="device to serve (default: eagerc if registered, else cpu)")
    demo.add_argument("--runs", type=int, default=50, help="timed warm runs (median)")
    warm = sub.add_parser("warm", help="compile every kernel a model needs, ahead of its first run")
    warm.add_argument("factory", metavar="MODULE:FACTORY",
                      help="a function returning (model, example_inputs), e.g. mypkg.models:tiny_bert")
    warm.add_argument("--train", action="store_true", help="also backward and an optimizer step")
    warm.add_argument("--workers", type=int, default=None, help="compile processes (default: one per core)")
    warm.add_argument("--device", default=None, help="device the model runs on (default: the model's)")
    warm.add_argument("--cluster", metavar="ADDRESS", default=None,
                      help="compile on a Ray cluster: 'auto', 'ray://head:10001' or 'local' "
                      "(docs/fleet.md); --workers then caps the tasks in flight")
    args = parser.parse_args(argv)
    from eagerc import _console

    _console.log_to_console()  # compiles and progress reach stderr as they happen
    if args.command == "warm":
        from eagerc.warm.warm_command import run_warm

        return run_warm(args.factory, train=args.train, workers=args.workers, device=args.device,
                        cluster=args.cluster)
    if args.command == "demo":
        from eagerc._demo import run_demo

        return run_demo(device=args.device, runs=args.runs)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
