"""Internal errors of capture itself (a guard, the monitor, a record build, a mock, the
segments of a stopped call): counted in `stop_reasons`, never seen by the program; after
MAX_FAULTS of them a function runs eagerly for good."""
import logging

MAX_FAULTS = 3  # internal errors of capture before a function runs eagerly for good
log = logging.getLogger("eagerc")


class Faults:
    """The internal errors of one captured function `fn`, counted into `stats` (a
    CaptureStats)."""

    def __init__(self, fn, stats):
        self.fn, self.stats = fn, stats
        self.count = 0
        self.disabled = False

    def internal_error(self, stage, error):
        """A fault of capture in `stage`: the call it happened in runs eagerly."""
        self.stats.stop(f"internal error in {stage}: {type(error).__name__}")
        self.count += 1
        log.debug("eagerc.capture: %s failed for %r", stage, self.fn, exc_info=error)
        if self.count >= MAX_FAULTS:
            self.disabled = True

    def segment_fault(self, record, error):
        """A fault of partial capture's segments: the record's stopped calls run eagerly
        from now on (not counted towards MAX_FAULTS)."""
        record.stream = False
        self.stats.stop(f"internal error in segments: {type(error).__name__}")
        log.debug("eagerc.capture: segments failed for %r", self.fn, exc_info=error)
