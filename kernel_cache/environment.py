"""What this machine can run: the arch names of namespaces, and whether an imported
namespace fits here. The one place arch strings are spelled (eagerc/targets.py uses them).
torch is imported only when asked: the rest of kernel_cache needs no torch.
"""
from __future__ import annotations


def cpu_arch() -> str:
    """e.g. 'cpu-avx512': host C++ kernels are specialized to the CPU's vector ISA."""
    import torch

    return f"cpu-{torch.backends.cpu.get_cpu_capability()}"


def cuda_arch(device=None) -> str:
    """e.g. 'sm_90-cuda13.0': cubins are built for one compute capability and CUDA."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}-cuda{torch.version.cuda}"


def local_arches() -> set:
    """The arches whose kernels this machine runs."""
    import torch

    arches = {cpu_arch()}
    if torch.cuda.is_available():
        arches.update(cuda_arch(i) for i in range(torch.cuda.device_count()))
    return arches


def refusal_here(fields: dict) -> str | None:
    """Why this machine cannot use a namespace with these fields (None: it can).

        >>> import torch
        >>> refusal_here({"torch_version": torch.__version__, "target_arch": cpu_arch()}) is None
        True
        >>> refusal_here({"torch_version": "0.0.1", "target_arch": cpu_arch()})[:27]
        'built with torch 0.0.1; thi'
    """
    import torch

    if fields.get("torch_version") != torch.__version__:
        return f"built with torch {fields.get('torch_version')}; this machine has {torch.__version__}"
    arch = fields.get("target_arch")
    if arch not in local_arches():
        return f"built for {arch}; this machine runs {', '.join(sorted(local_arches()))}"
    return None
