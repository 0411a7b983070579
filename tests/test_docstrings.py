"""The examples in docstrings run as written (doctest), so the documentation cannot drift."""
import doctest
import importlib

import pytest

MODULES = """eagerc eagerc.per_op.registration eagerc.targets eagerc.codegen eagerc.cache eagerc.kernel_key eagerc.testing
eagerc.capture
eagerc.capture.guards eagerc.capture.annotations eagerc.capture.refgraph eagerc.device
eagerc.device.device_module kernel_cache kernel_cache.interface kernel_cache.records
kernel_cache.remote kernel_cache.namespace kernel_cache.layout kernel_cache.disk
kernel_cache.tiered kernel_cache.tables kernel_cache.remote_stats eagerc.device.distributed eagerc._cluster
eagerc.device.module_conversion eagerc.device.memory eagerc.device.streams""".split()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, fresh_cache):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples: drop it from the list"
    assert result.failed == 0
