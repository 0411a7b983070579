"""eagerc serves mydevice in the tests' process: installed, mydevice was imported by
`import torch` (its torch.backends entry point) and imported eagerc; from a checkout, it is
imported here before eagerc (eagerc imported first would take PrivateUse1 for its own
device). The ATen kernels the device registers on its own are read in a fresh interpreter
that imports mydevice alone (autoload off)."""
import json
import os
import subprocess
import sys

# The tests count misses, compiles and hits: each miss compiles before it is answered (by
# default a miss is answered at once and compiled by the compile service, so a signature's
# second call may miss again, loading the kernel the service stored).
os.environ.setdefault("EAGERC_COMPILE", "now")

import torch  # noqa: E402

import mydevice  # noqa: F401  (before eagerc: it renames PrivateUse1)
import eagerc  # noqa: F401  (serves every other op on mydevice)

_OWN = ("import json, torch, mydevice\n"
        "print(json.dumps(sorted(op for op in torch._C._dispatch_get_registrations_for_dispatch_key("
        "'PrivateUse1') if op.startswith('aten::'))))\n")
OWN_KERNELS = json.loads(subprocess.run(
    [sys.executable, "-c", _OWN], env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    capture_output=True, text=True, check=True).stdout)
