"""``python -m eagerc warm MODULE:FACTORY [--train] [--workers N] [--device D]``."""
from __future__ import annotations

import importlib
import logging
import os
import sys

log = logging.getLogger("eagerc")


def _bad_input(message: str) -> SystemExit:
    """One line on stderr and exit status 2, as argparse does for a bad argument."""
    print(f"python -m eagerc warm: {message}", file=sys.stderr)
    return SystemExit(2)


def load_factory(spec: str):
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise _bad_input(f"expected MODULE:FACTORY (e.g. mypkg.models:tiny_bert), got {spec!r}")
    sys.path.insert(0, os.getcwd())  # like `python -m`, modules next to the caller resolve
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if module_name.endswith(".py") or os.sep in module_name:
            raise _bad_input(f"{module_name!r} is a file path; MODULE is a module name importable from "
                             f"here, e.g. mypkg.models for mypkg/models.py") from None
        raise _bad_input(f"cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise _bad_input(f"module {module_name!r} has no {attr!r}") from None


def run_warm(spec: str, train: bool, workers, device, cluster=None) -> int:
    from eagerc.warm import warm_cache

    log.info("eagerc warm: building the model (%s)", spec)
    made = load_factory(spec)()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise _bad_input(f"{spec} must return (model, example_inputs)")
    model, inputs = made
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    log.info("eagerc warm: running the model on fake tensors to find its calls%s, then compiling "
             "what the kernel cache lacks in %s", " (forward, backward, optimizer step)" if train else "",
             f"tasks of the Ray cluster {cluster!r}" if cluster is not None else
             "this process" if workers == 0 else f"{workers or os.cpu_count() or 1} worker processes")
    report = warm_cache(model, *inputs, device=device, train=train, workers=workers, cluster=cluster)
    print(report)
    # Failed calls are listed and exit 0 (on an existing device they run its own kernels);
    # a discovery that stopped early left the rest of the model unwarmed: exit 1.
    return 0 if report.complete else 1
