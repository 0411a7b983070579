"""`CaptureStop`: raised where a monitor run meets what it cannot record (op_recorder.py,
numpy_ops.py, script_calls.py, speculate.py, training.py); the run goes on eagerly and the
record stops there. Never escapes to the program."""


class CaptureStop(Exception):
    """Raised inside the recorder to say capture must stop; never escapes to the user."""
