"""Coverage workers (eagerc/workers): processes that run the (overload, dtype) tasks the
runner sends, one at a time, and answer one result record each. A worker that crashes or
hangs is killed and replaced by the runner, and that task's result is the crash or the
timeout; a task the tool itself fails on is the runner's ``error`` record, and the
worker goes on."""
from __future__ import annotations

import sys


def start(device: str):
    """A worker's setup (eagerc/workers/protocol.py): the device warmed up, kernel loads
    recorded; the handler checks one task."""
    import torch

    torch.set_num_threads(1)  # one thread per worker: the runner runs one worker per core
    from eagerc import _console
    from eagerc.coverage.execute import Device, install_load_recorder, run_task

    dev = Device(device)
    dev.warm_up()  # before recording loads: its kernel is no task's
    install_load_recorder()

    def check(task: dict) -> dict:
        # The last such line in a crashed worker's output names the task (runner._crash_record).
        print(f"coverage worker: {task['op']} {task['dtype']}", file=sys.stderr, flush=True)
        with _console.compile_lines() as compiled:
            record = run_task(task, dev)
        record["compile_lines"] = compiled.lines  # the runner shows them, then drops them
        return record

    return check
