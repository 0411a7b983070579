"""Lightning's accelerator for the eagerc device: ``Trainer(accelerator="eagerc")``.

Lightning picks among the accelerators it knows (CPU, CUDA, MPS, XLA: ``"auto"`` never
picks this device) and takes others as registered classes. Importing this module
registers ``"eagerc"`` with ``lightning.pytorch``'s registry (and with Fabric's); eagerc
itself never imports Lightning, so this is the one line a Lightning user adds::

    import eagerc.device.lightning  # noqa: F401
    trainer = lightning.Trainer(accelerator="eagerc", strategy="single_eagerc")

Lightning gives one device of an accelerator it does not know a single-device strategy
on the CPU, so one device is named by the strategy ``"single_eagerc"`` (registered here
too; ``lightning.Fabric`` takes the same two names). On GPU memory
(``EAGERC_BACKING=cuda``) each GPU is an eagerc device, and ``devices=N`` (N > 1) runs
Lightning's DDP over the device's default c10d backend (docs/distributed.md).
"""
from __future__ import annotations

import torch
from lightning.fabric.accelerators import ACCELERATOR_REGISTRY as _FABRIC_REGISTRY
from lightning.fabric.accelerators.accelerator import Accelerator as _FabricAccelerator
from lightning.fabric.strategies import STRATEGY_REGISTRY as _FABRIC_STRATEGIES
from lightning.fabric.strategies import SingleDeviceStrategy as _FabricSingleDevice
from lightning.pytorch.accelerators import AcceleratorRegistry as _TRAINER_REGISTRY
from lightning.pytorch.accelerators.accelerator import Accelerator as _TrainerAccelerator
from lightning.pytorch.strategies import SingleDeviceStrategy as _TrainerSingleDevice
from lightning.pytorch.strategies import StrategyRegistry as _TRAINER_STRATEGIES

import eagerc.device

__all__ = ["EagercAccelerator", "EagercFabricAccelerator", "SINGLE_DEVICE"]

# The strategy that runs on one eagerc device (Lightning's own single-device strategy).
SINGLE_DEVICE = f"single_{eagerc.device.NAME}"


class _Eagerc:
    """What both Lightning APIs ask of an accelerator, answered for the eagerc device."""

    def setup_device(self, device: torch.device) -> None:
        if device.type != eagerc.device.NAME:
            # Lightning's default strategy for one device of an accelerator it does not
            # know is on the CPU.
            raise ValueError(f"the eagerc accelerator runs on eagerc devices, got {device}: "
                             f"for one device pass strategy={SINGLE_DEVICE!r}")
        torch.eagerc.set_device(device)

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices) -> list[int]:
        """The device indices Lightning's ``devices`` names: a count (``1``, ``"2"``),
        every index (``-1``, ``"auto"``), or indices (``[0]``, ``"0,1"``)."""
        count = torch.eagerc.device_count()
        if isinstance(devices, str):
            devices = devices.strip()
            if devices == "auto":
                devices = -1
            elif "," in devices:
                devices = [int(i) for i in devices.split(",") if i.strip()]
            else:
                devices = int(devices)
        if isinstance(devices, int):
            indices = list(range(count if devices == -1 else devices))
        else:
            indices = list(devices)
        if not indices or not all(0 <= i < count for i in indices):
            raise ValueError(f"devices={devices!r}: the eagerc device has {count} "
                             f"index(es) (0 to {count - 1})")
        return indices

    @staticmethod
    def get_parallel_devices(devices) -> list[torch.device]:
        return [torch.device(eagerc.device.NAME, i) for i in _Eagerc.parse_devices(devices)]

    @staticmethod
    def auto_device_count() -> int:
        return torch.eagerc.device_count()

    @staticmethod
    def is_available() -> bool:
        """Whether ``import eagerc`` registered the device (where torch sees a CUDA GPU it
        does so only with ``EAGERC_BACKING=cuda`` or ``EAGERC_DEVICE=1``)."""
        return hasattr(torch, eagerc.device.NAME)

    @staticmethod
    def name() -> str:
        return eagerc.device.NAME

    @classmethod
    def register_accelerators(cls, registry) -> None:
        registry.register(cls.name(), cls, description=cls.__name__, override=True)


class EagercAccelerator(_Eagerc, _TrainerAccelerator):
    """``lightning.pytorch.Trainer(accelerator="eagerc")``.

        >>> import eagerc, eagerc.device.lightning, lightning
        >>> lightning.Trainer(accelerator="eagerc", strategy="single_eagerc", logger=False,
        ...                   enable_progress_bar=False).strategy.root_device
        device(type='eagerc', index=0)
    """

    def get_device_stats(self, device) -> dict:
        return {}


class EagercFabricAccelerator(_Eagerc, _FabricAccelerator):
    """``lightning.fabric.Fabric(accelerator="eagerc")``."""


EagercAccelerator.register_accelerators(_TRAINER_REGISTRY)
EagercFabricAccelerator.register_accelerators(_FABRIC_REGISTRY)
for _registry, _strategy in ((_TRAINER_STRATEGIES, _TrainerSingleDevice),
                             (_FABRIC_STRATEGIES, _FabricSingleDevice)):
    _registry.register(SINGLE_DEVICE, _strategy, description=f"{_strategy.__name__} on eagerc",
                       override=True, device=f"{eagerc.device.NAME}:0")  # parsed when used
