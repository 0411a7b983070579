"""The unittest test method running now, found by walking the stack's frames: a cheap
stand-in for torch.testing's ``extract_test_fn``.

torch's own ``extract_test_fn`` walks ``inspect.stack()``, which reads every frame's source
lines and scans sys.modules per frame: 0.4 s a call under pytest's deep stacks, and OpInfo
calls it twice per ``sample_inputs`` call. The suite's conftest (OpInfo tests) and
tools/conformance.py (TorchCTS, which generates samples while collecting) both replace it
with :func:`running_unittest_fn`, which gives the same answer from the bare frames."""
from __future__ import annotations

import sys
import unittest


def running_unittest_fn():
    """The function of the innermost unittest.TestCase test method on the caller's stack (a
    frame whose ``self`` is the TestCase running it), or None outside one."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, unittest.TestCase):
                *_, cls_name, test_name = candidate.id().rsplit(".", 2)
                if cls_name == type(candidate).__name__ and test_name.startswith("test"):
                    return getattr(candidate, test_name).__func__
            frame = frame.f_back
    except Exception:  # a frame's self whose id() or attribute fails: as torch, no test
        pass
    return None
