"""The tests compare the device with CPU eager: full float32 on the GPU (no TF32 in cuBLAS
or cuDNN, which the device's matmuls and convolutions reach through CUDA)."""
import os

# The tests count misses, compiles and hits: each miss compiles before it is answered (by
# default a miss is answered at once and compiled by the compile service).
os.environ.setdefault("EAGERC_COMPILE", "now")

import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
