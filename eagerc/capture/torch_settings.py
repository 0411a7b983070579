"""Writes of process-wide torch settings inside a captured call: autocast
(`@torch.amp.autocast("cuda", enabled=False)` around a rotary embedding) and the
scaled-dot-product-attention backends (`with sdpa_kernel([...])`, `torch.backends.cuda.
sdp_kernel(...)`). The settings act below the op recorder (dispatch), and capture takes
them as fixed for the process (their queries are annotated pure), so a record replays none
of these writes: a write that leaves its setting as it is changes nothing and is allowed;
one that changes it stops capture (the ops after it would run under other settings).
"""
import torch


def _autocast_enabled(args):
    return torch.is_autocast_enabled(*args[:-1])


def _autocast_dtype(args):
    return torch.get_autocast_dtype(args[0])


# setter -> (how many positional arguments it takes at most, the setting's current value
# for the setter's arguments but the last)
_SETTINGS = {
    torch.set_autocast_enabled: (2, _autocast_enabled),
    torch.set_autocast_dtype: (2, _autocast_dtype),
    torch.set_autocast_cache_enabled: (1, lambda args: torch.is_autocast_cache_enabled()),
}
# SDPA backend flags: they decide only which kernel scaled_dot_product_attention runs, and
# not all of them for every device (CPU picks between its flash kernel and math; the
# "overrideable" backend is a PrivateUse1 device's). vit-pytorch's vivit turns the
# overrideable one off around CPU attention. A change is allowed; an SDPA call on a device
# whose choice a changed flag steers stops capture (`sdp_changed_for`), and so does a run
# that returns with the flags changed.
_SDP = {}  # setter -> flag name
_SDP_GET = {}  # flag name -> getter
for _name in ("cudnn", "flash", "mem_efficient", "math", "overrideable"):
    _set = getattr(torch._C, f"_set_sdp_use_{_name}", None)
    _get = getattr(torch._C, f"_get_{_name}_sdp_enabled", None)
    if _set is not None and _get is not None:
        _SETTINGS[_set] = (1, lambda args, _get=_get: _get())
        _SDP[_set], _SDP_GET[_name] = _name, _get
_SDP_FLAGS_FOR = {"cpu": ("flash", "math"), "cuda": ("cudnn", "flash", "mem_efficient", "math")}


def sdp_flags():
    return {name: get() for name, get in _SDP_GET.items()}


def is_sdp_setter(fn):
    return any(fn is f for f in _SDP)


def sdp_changed_for(baseline, args, kwargs):
    """Whether an SDPA call on these tensors may pick another kernel than under the flags
    `baseline` (the run's start)."""
    changed = {n for n, v in sdp_flags().items() if baseline.get(n) != v}
    if not changed:
        return False
    for t in list(args) + list(kwargs.values()):
        if isinstance(t, torch.Tensor) and \
                changed & set(_SDP_FLAGS_FOR.get(t.device.type, _SDP_GET)):
            return True
    return False

# Balanced inside a `with torch.autocast(...)`: the nesting count goes up on entry and back
# down on exit, and the cache of cast weights is cleared when it reaches 0 (it holds only
# copies made under an enabled autocast, which no unchanged setting enables).
BALANCED = (torch.autocast_increment_nesting, torch.autocast_decrement_nesting,
            torch.clear_autocast_cache)


def unchanged(fn, args, kw_values):
    """None when `fn` is no settings write; else whether this call leaves its setting as it
    is (False when it changes it, or takes arguments not understood here)."""
    try:
        entry = _SETTINGS.get(fn)
    except TypeError:  # unhashable callable
        return None
    if entry is None:
        return None
    most, current = entry
    if kw_values or not 1 <= len(args) <= most:
        return False
    try:
        return current(args) == args[-1]
    except Exception:  # noqa: BLE001 - arguments the query refuses: not understood
        return False
