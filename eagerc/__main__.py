"""Command line: ``python -m eagerc demo`` runs a real model on compiled kernels."""
from __future__ import annotations

import argparse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eagerc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a model with compiled kernels, cold then warm")
    demo.add_argument("--device", default=None, help="device to serve (default: eagerc if registered, else cpu)")
    demo.add_argument("--runs", type=int, default=50, help="timed warm runs (median)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from eagerc._demo import run_demo

        return run_demo(device=args.device, runs=args.runs)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
