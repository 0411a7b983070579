"""What the command-line tools print: log lines and progress that reach the console
(eagerc/_console.py), the demo's table and speed words, warm's summary that adds up, and
the coverage report's untested ops and chart caption."""
from __future__ import annotations

import logging
import re

import pytest

from eagerc import _console


@pytest.fixture
def console(capsys):
    """The CLI's console handler on the eagerc logger, removed afterwards."""
    logger = logging.getLogger("eagerc")
    handlers, level = list(logger.handlers), logger.level
    _console.log_to_console()
    yield capsys
    logger.handlers[:] = handlers
    logger.setLevel(level)


def test_library_use_adds_no_handler():
    import eagerc  # noqa: F401

    assert not any(isinstance(h, _console._ConsoleHandler) for h in logging.getLogger("eagerc").handlers)


def test_info_records_reach_stderr_once_and_first_lines_only(console):
    _console.log_to_console()  # a second call adds no second handler
    log = logging.getLogger("eagerc")
    log.info("eagerc: compiled %s in %.2f s", "aten::abs(float32[s] C)", 1.5)
    log.info("eagerc: aten::x not compiled: why\nTraceback (most recent call last): ...")
    log.debug("eagerc: key details")
    err = console.readouterr().err
    assert err.splitlines() == ["eagerc: compiled aten::abs(float32[s] C) in 1.50 s",
                                "eagerc: aten::x not compiled: why [...]"]


def test_plain_progress_writes_lines_off_a_terminal(console, monkeypatch):
    monkeypatch.setattr(_console, "on_terminal", lambda: False)
    bar = _console.progress(7, desc="eagerc warm", unit="calls", every=3)
    assert isinstance(bar, _console.PlainProgress)
    for op in ["aten::a", "aten::b", "aten::c", "aten::d", "aten::e", "aten::f", "aten::g"]:
        bar.set_postfix_str(op)
        bar.update(1)
    bar.close()
    lines = console.readouterr().err.splitlines()
    assert [re.sub(r", \d+ s", "", line) for line in lines] == [
        "eagerc warm: 3/7 calls done (last: aten::c)",
        "eagerc warm: 6/7 calls done (last: aten::f)",
        "eagerc warm: 7/7 calls done (last: aten::g)"]


def test_demo_table_names_devices_and_fits_long_names():
    from eagerc import _demo
    from eagerc.targets import served_device

    counters = {"hits": 1, "misses": 1, "compiles": 1, "disk_loads": 0, "fallbacks": 0, "fallback_reasons": {}}
    long = "aten::_scaled_dot_product_flash_attention_for_cpu"
    rows = _demo.op_rows({f"{long}@PrivateUse1": counters, "aten::add.Tensor@PrivateUse1": counters})
    assert [name for name, _ in rows] == [long, "aten::add.Tensor"]
    mixed = _demo.op_rows({"aten::mm@PrivateUse1": counters, "aten::mm@CPU": counters})
    assert [name for name, _ in mixed] == ["aten::mm (cpu)", f"aten::mm ({served_device('PrivateUse1').lower()})"]
    lines = _demo.table(rows)
    assert all("@" not in line for line in lines)
    widths = {len(line) for line in lines}
    assert len(widths) == 1, lines  # every row as wide as the header: columns line up


def test_demo_speed_says_faster_or_slower():
    from eagerc._demo import speed_words

    assert speed_words(0.5, 1.0) == "2.00x faster than CPU eager"
    assert speed_words(1.5, 1.0) == "1.50x slower than CPU eager"


def test_warm_summary_adds_up():
    from eagerc.warm.report import WarmReport

    report = WarmReport("cpu", ops_found=12, calls=31, cached=17, compiled=26,
                        failed=[("aten::x", "x(float32[2])", "one"), ("aten::x", "x(float32[2])", "two")])
    assert (report.cached, report.calls_compiled, report.calls_failed) == (17, 13, 1)
    text = str(report)
    assert "31 distinct calls" in text and "= 17 with nothing to compile + 13 compiled + 1 failed" in text
    assert re.search(r"kernels compiled\s+26, by the 13 calls that compiled", text)


def test_report_md_lists_no_sample_as_not_tested(monkeypatch):
    from eagerc.coverage import report_md

    report = {"device": "eagerc", "torch_version": "t", "eagerc_version": "e", "machine": "m", "dtypes": ["float32"],
              "grad": False, "created": "now", "command": ["python"], "working_statuses": ["pass"],
              "summary": {}, "ops": {}}
    rows = [("aten::abs.out", "abs", "float32", {"status": "no_sample", "detail": "CPU eager rejected every sample"}),
            ("aten::mm", "mm", "float32", {"status": "mismatch", "detail": "max abs 1"})]
    monkeypatch.setattr(report_md, "rows", lambda _: rows)
    md = report_md.render(report)
    not_working = md[md.index("## Not working"):md.index("## Not tested")]
    not_tested = md[md.index("## Not tested"):]
    assert "mismatch" in not_working and "no_sample" not in not_working
    assert "### no_sample (1)" in not_tested and "`aten::abs.out`" in not_tested


@pytest.mark.parametrize("families,caption", [(8, "all 8 families"), (1, "all 1 family"),
                                              (45, "the 39 largest of 45 families, then the other 6 in one bar")])
def test_report_html_caption_counts_this_reports_families(families, caption):
    from eagerc.coverage import report_html

    assert report_html.chart_caption(families) == caption
