"""The tests compare the device with CPU eager: full float32 on the GPU (no TF32 in cuBLAS
or cuDNN, which the device's matmuls and convolutions reach through CUDA)."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
