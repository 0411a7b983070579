"""TorchCTS manifest for the eagerc device: what the device claims to support.

TorchCTS (``pip install torchcts``) reads a ``manifest.py`` from its working directory;
``tools/conformance.py`` runs it from a scratch directory whose ``manifest.py`` loads this
file. A capability set to False is declined: TorchCTS files its tests under structured
filtered accounting instead of running them. Each declined capability says why below;
docs/conformance.md has the pass rates per level.
"""
import re

import torch

# Ops whose results on NaN/Inf inputs are ATen's CPU kernel's, which TorchCTS's contract
# reference for those inputs does not give: the device claims ATen's IEEE754 behaviour for
# them, not TorchCTS's (tools/conformance.py's NOT_ATEN_REFERENCES has each reference, and
# tests/test_conformance_fixes.py checks the device's values are CPU eager's). TorchCTS
# still runs their clean inputs; docs/conformance.md lists them.
IEEE754_ATEN_NOT_CONTRACT = {
    # i0_mpmath: i0(±inf) is inf in mpmath, NaN in ATen's CPU kernel.
    "i0": "ATen's i0(±inf) is NaN",
    # complex_tensor_integer_power: exact integer powers per lane, (inf+1j) ** 3 is nan+infj;
    # ATen's complex pow takes its general path (inf+nanj).
    "pow": "ATen's complex pow of an infinite base",
    "float_power": "ATen's complex pow of an infinite base",
    # complex_ldexp_integral_lane_scale: ATen multiplies by 2**e as a complex number.
    "ldexp": "ATen's complex ldexp multiplies by 2**e as a complex",
    # complex_unit_alpha_add_sub: TorchCTS adds real and imaginary parts apart; ATen multiplies
    # the other operand by alpha = 1+0j first ((nan+0j) * (1+0j) = nan+nanj).
    "add": "ATen's complex add multiplies by alpha first",
    "sub": "ATen's complex sub multiplies by alpha first",
    "subtract": "ATen's complex sub multiplies by alpha first",
    "rsub": "ATen's complex rsub multiplies by alpha first",
    # TorchCTS's matmul_family_reference on infinite inputs differs from ATen's (BLAS)
    # products in where inf - inf gives NaN.
    **{name: "ATen's (BLAS) matrix products of infinite inputs"
       for name in ("mm", "matmul", "addmm", "addbmm", "baddbmm", "linear", "chain_matmul")},
    # lanczos3_exact_zero: TorchCTS's own Lanczos weights on NaN/inf inputs.
    "_upsample_lanczos2d_aa": "ATen's CPU anti-aliased Lanczos upsampling of NaN/inf inputs",
    # bce_with_logits_stable: inf for logits of both infinities; ATen's CPU kernel gives NaN.
    "binary_cross_entropy_with_logits": "ATen's binary_cross_entropy_with_logits of infinite logits",
}

manifest = {
    "manifest_version": 1,
    "device_name": "eagerc",
    "backend_import": "eagerc",
    "supported_dtypes": {
        torch.float16: True,
        torch.float32: True,
        torch.float64: True,
        torch.bfloat16: True,
        torch.int8: True,
        torch.int16: True,
        torch.int32: True,
        torch.int64: True,
        torch.uint8: True,
        torch.bool: True,
        torch.complex64: True,
        torch.complex128: True,
    },
    "device_count": 1,
    "ieee754_seed": 67,
    "max_samples": 3,
    "max_samples_ieee754": 1,
    "semantic_level": 7,
    "hardware": {
        "memory_model": "discrete",
        "device_memory_gb": "auto",
        "system_memory_gb": "auto",
        # Host memory overcommits as the CPU's does: an allocation larger than the machine's
        # memory succeeds, and the process is killed when it writes the pages (TorchCTS's
        # test_oom_recovery fills a tensor of the device's memory size: 17 GB here).
        "oom_recoverable": False,
    },
    "resource_limits": {
        "max_device_memory_mb": None,
        "max_system_memory_mb": None,
        "max_tensor_size_mb": None,
        "cleanup_threshold_pct": 80,
    },
    "capabilities": {
        "inference": True,
        "training": True,
        "serialization": True,
        "rng": True,
        "device_generator": True,
        "rng_distributions": True,
        "double_backward": True,
        "gradcheck": True,
        "gradient_checkpointing": True,
        "autocast": True,
        "fused_optimizer": True,
        "dataloader": True,
        "module_hooks": True,
        "channels_last": True,
        # Sparse (COO/CSR/...) and nested tensors: the device has no SparsePrivateUse1 or
        # NestedTensorPrivateUse1 kernels, so such tensors cannot be created on it.
        "sparse": False,
        "nested": False,
        # torch 2.13 has no named tensors (torch.empty(names=...) is a TypeError on CPU).
        "named_tensor": False,
        "foreach": True,
        # Quantized tensors: no QuantizedPrivateUse1 kernels (empty_quantized raises).
        # float8 is not claimed: TorchCTS's fp8 tests have not been run against the device.
        "fp8": False,
        "quantized_container_plumbing": False,
        "native_quantization": False,
        "custom_quantized_decode": False,
        "compile": True,
        "pinned_memory": True,
        "streams": True,
        "events": True,
        "deterministic": True,
        # No guard allocator (canaries around blocks that catch out-of-bounds writes): the
        # device module has no guard_allocator_enabled().
        "guard_alloc": False,
        "device_api": True,
        # The device has one index (device_count() == 1).
        "multi_device": False,
        # NaN/Inf inputs are claimed for every op but IEEE754_ATEN_NOT_CONTRACT's (above): a
        # regex TorchCTS searches in each op's name (its in-place form ends in "_").
        "ieee754": "^(?!(?:" + "|".join(map(re.escape, IEEE754_ATEN_NOT_CONTRACT)) + ")_?$)",
    },
    # Ops eager has no kernel for on the CPU (the device's home) and that torch never calls
    # for the device: declined, each with why.
    "skip_ops": [
        # Backwards of CUDA's attention kernels: their forwards are CUDA's (Meta elsewhere),
        # and the device's scaled_dot_product_attention takes the CPU's choice.
        "aten::_efficient_attention_backward",
        "aten::_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_flash_attention_backward",
        # A hook ATen leaves to a PrivateUse1 backend that selects the overrideable SDPA
        # backend; the device selects the CPU's, so torch never calls it.
        "aten::_scaled_dot_product_fused_attention_overrideable_backward",
        # SyncBatchNorm's CUDA kernel (CPU has none); its out= form is CUDA's own kernel,
        # not a composite of the functional op, and the device serves only ops the CPU or
        # a composite has a kernel for (batch_norm_stats is compiled:
        # compile/accelerator/batch_norm_stats.py).
        "aten::batch_norm_elemt",
        "aten::batch_norm_elemt.out",
        # ATen has only a Meta kernel (CPU's and CUDA's raise NotImplementedError as the
        # device does); eager's out= kernels resize with at::native::resize_output.
        "aten::_resize_output_",
        "aten::_resize_output",
        "aten::_resize_output.out",
        # NestedTensor's kernels only: a dense tensor raises on CPU as on the device.
        "aten::matmul_backward",
        "aten::matmul_backward.out",
        # Pinning a device tensor: ATen's pin_memory/_pin_memory raise "cannot pin '...'
        # only dense CPU tensors can be pinned" for every tensor that is not on the CPU (a
        # CUDA or meta tensor alike), as the device's do; TorchCTS's PrivateUse1 oracle
        # expects a no-op. Pinning CPU tensors for copies to the device is not declined.
        "aten::pin_memory",
        "aten::_pin_memory",
        "aten::_pin_memory.out",
    ],
    "tolerance_overrides": {},
    "supported_container_formats": {},
    "custom_container_decoders": {},
    "custom_test_dirs": [],
}
