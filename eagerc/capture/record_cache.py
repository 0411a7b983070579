"""Records of one captured function (paper §2.2, §6.1): a `Record` is a guard, a mock and
the operator graph of one monitor run (built by record_builder.py); `RecordCache` holds a
function's records, most recently matched first.
"""
from .guard_explain import explainer


class Record:
    """guard(args, kwargs) -> slots or None; mock(slots) -> the call's result."""

    def __init__(self, guard, mock=None, graph_module=None, stop_reason=None, source=""):
        self.guard = guard
        self.mock = mock
        self.graph_module = graph_module
        self.stop_reason = stop_reason
        self.source = source  # the generated guard and mock, for debugging
        # An eager record of a run the program ended with an exception (monitor_run.py).
        self.raised = False
        # Of an eager record: its hits' op stream cut into compiled segments (stream.py);
        # None: not recorded yet, False: none (failed, or nothing to compile).
        self.stream = None
        self.stream_recordings = 0
        self._full = None  # (checks of the full guard, its namespace), for why_not
        self._why_not = None

    def why_not(self, args, kwargs):
        """The first check of this record's guard that fails on (args, kwargs), as its
        source with guard variables spelled as access paths (`args[0].mode != 'a'`); None
        if the guard passes. For reports of misses (`capture_stats`' guard_failures)."""
        if self._why_not is None:
            self._why_not = explainer(*self._full)
        return self._why_not(args, kwargs)

    def changed_value(self):
        """After `why_not`: (access path, "file:line" where the program read it) when its
        first failing check was of a value the program read, else None."""
        return getattr(self._why_not, "changed", None)

    @property
    def eager(self):
        return self.mock is None


class RecordCache:
    """Records of one function, most recently matched first (paper §6.1)."""

    def __init__(self):
        self.records = []

    def match(self, args, kwargs):
        for i, rec in enumerate(self.records):
            slots = rec.guard(args, kwargs)
            if slots is not None:
                if i:
                    self.promote(rec)
                return rec, slots
        return None, None

    def promote(self, record):
        """`record` matched a call: it is tried first next time (if it is still held)."""
        if record in self.records:
            self.records.remove(record)
            self.records.insert(0, record)

    def add(self, record):
        self.records.insert(0, record)

    def remove(self, record):
        if record in self.records:
            self.records.remove(record)

    def __len__(self):
        return len(self.records)
