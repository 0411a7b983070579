"""`CaptureStats`: the counters of one captured function, as `eagerc.capture_stats` reports
them (its docstring says what each counts). The modules that count (captured.py, faults.py,
graph_compiler.py, partial_capture.py) call its methods; `report` is the plain dict."""
import collections

# The counters, in the order capture_stats reports them.
COUNTERS = ("hits", "misses", "graphs", "graphs_from_disk", "eager_runs", "split_runs",
            "training_graphs", "segment_graphs", "segment_runs", "segment_ops",
            "segment_divergences", "value_misses")
# The counters a split run sums over its captured children (`split` in capture_stats).
SPLIT_COUNTERS = ("graphs", "hits", "misses", "eager_runs", "segment_graphs", "segment_runs",
                  "segment_ops", "segment_divergences")


class CaptureStats:
    """Counters of one captured function."""

    def __init__(self):
        for name in COUNTERS:
            setattr(self, name, 0)
        self.stop_reasons = collections.Counter()  # reason -> calls that stopped for it
        self.stop_sites = {}  # reason -> {"file:line" of the program where it stopped: count}
        # per miss while records exist: the failing check of the most recently matched
        # record's guard (Record.why_not)
        self.guard_failures = collections.Counter()

    def stop(self, reason, site=None):
        """A call stopped (ran eagerly) for `reason`, at `site` ("file:line") if known."""
        self.stop_reasons[reason] += 1
        if site is not None:
            sites = self.stop_sites.setdefault(reason, {})
            sites[site] = sites.get(site, 0) + 1

    def guard_failed(self, why):
        self.guard_failures[why] += 1

    def graph_compiled(self, from_disk):
        """A graph compiled; `from_disk`: 1 (True) when loaded from kernel_cache instead."""
        self.graphs_from_disk += from_disk

    def training_graph(self):
        self.training_graphs += 1

    def split_run(self):
        self.split_runs += 1

    def segments_compiled(self, n):
        self.segment_graphs += n

    def segment_run(self, answered):
        """A stopped call replayed its segments; `answered` ops came from them."""
        self.segment_runs += 1
        self.segment_ops += answered

    def segment_divergence(self):
        """A replay left the recorded op stream."""
        self.segment_divergences += 1

    def split_counters(self):
        """{counter: value} of SPLIT_COUNTERS."""
        return {name: getattr(self, name) for name in SPLIT_COUNTERS}

    def report(self):
        """The plain dict `capture_stats` returns (before records and split)."""
        out = {name: getattr(self, name) for name in COUNTERS}
        out["stop_reasons"] = dict(self.stop_reasons)
        out["stop_sites"] = {k: dict(v) for k, v in self.stop_sites.items()}
        out["guard_failures"] = dict(self.guard_failures)
        return out
