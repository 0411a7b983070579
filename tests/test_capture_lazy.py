"""Lazy modules captured directly (eagerc/capture/lazy_modules.py): their parameters are
materialized before the monitor run, as eager's pre-hook does, so the first call records
one graph and identical calls hit; values and parameters equal eager's."""
import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.LazyLinear(4), (3, 5)),
    (lambda: torch.nn.LazyConv2d(4, 3), (2, 3, 8, 8)),
    (lambda: torch.nn.LazyBatchNorm1d(), (4, 6))], ids=["linear", "conv2d", "batchnorm"])
def test_lazy_module_is_one_record(make, shape):
    module, ref = make(), make()  # (a lazy module cannot be deep-copied)
    x = torch.randn(*shape)
    torch.manual_seed(1)
    want = ref(x)
    captured = capture(module, backend="eager")
    torch.manual_seed(1)  # the same draws for the parameters as eager's first call
    with torch.no_grad():
        assert_close(captured(x), want)
        for _ in range(2):
            assert_close(captured(x), ref(x))
    assert type(module) is type(ref)  # turned into the non-lazy class, as in eager
    assert_close(dict(module.state_dict()), dict(ref.state_dict()))
    stats = capture_stats(captured)
    assert stats["records"] == 1 and stats["graphs"] == 1 and stats["hits"] == 2, stats
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
