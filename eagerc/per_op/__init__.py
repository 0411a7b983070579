"""The per-op mode: ATen calls served by compiled kernels, one op at a time.

registration.py  enable / disable / stats: which ops of a device the kernel holders serve
resolver.py      an L1 miss from the holder, answered in one pass (key -> store -> eager's
                 check -> compile -> store -> load -> a typed answer)
eager_rules.py   whether eager's own kernel accepts the call (run once per miss)
background.py    compile="background": serve the miss now, compile on a thread
"""
