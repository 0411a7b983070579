"""The guard's fast path: the static part of a guard (state reached from the called
object, globals and closures) is skipped while the version tags of the dicts holding it
are those seen at the last full pass.
"""
import functools


class StaticVersionGuard:
    """guard(args, kwargs) -> slots or None, skipping the static part while its dicts'
    version tags are the ones seen at the last full pass (CPython bumps a dict's version
    on every change)."""

    def __init__(self, full, fast, fast_state, versioned_dicts, enabled):
        self.full, self.fast, self.versioned_dicts = full, fast, versioned_dicts
        self.fast_state = fast_state  # the full pass's static variables -> what fast reads
        self.enabled = enabled
        self.static = None
        self.unchanged = None  # () -> bool, set by a full pass

    def __call__(self, args, kwargs):
        if self.unchanged is not None and self.unchanged():
            return self.fast(args, kwargs, self.static)
        res = self.full(args, kwargs)
        if res is None:
            return None
        slots, static = res
        if self.enabled:
            self.static = self.fast_state(static)
            self.unchanged = _versions_checker(self.versioned_dicts(static))
        return slots


def _versions_checker(dicts):
    """A no-argument function: are all `dicts` unchanged (same version tags) since now?

    Uses eagerc's `_C._DictVersions` (CPython <= 3.13), else torch's C++ guard manager (one
    dict-version leaf guard per dict, ~15 ns each) when its API is the one we know, else a
    Python loop over `dict_version` (~50 ns each).
    """
    dicts = list(dicts)
    try:
        from _eagerc import _DictVersions  # reads the version tags directly (~1 ns each)

        return _DictVersions(dicts)
    except (ImportError, TypeError):
        pass
    try:
        from torch._dynamo.guards import GuardManagerType
        from torch._C._dynamo.guards import RootGuardManager

        root = RootGuardManager()
        for i, d in enumerate(dicts):
            m = root.list_getitem_manager(i, f"D[{i}]", d, GuardManagerType.GUARD_MANAGER)
            try:
                m.add_dict_version_guard(d, [f"D[{i}]"], None)  # torch >= 2.12: user_stack
            except TypeError:
                m.add_dict_version_guard(d, [f"D[{i}]"])
        if root.check(dicts):
            return functools.partial(root.check, dicts)
    except Exception:  # noqa: BLE001 - an API we do not know: the portable path below
        pass
    empty = tuple(d for d in dicts if not d)
    full = tuple(d for d in dicts if d)
    versions = tuple(map(dict_version, full))
    return lambda: not any(map(len, empty)) and tuple(map(dict_version, full)) == versions


try:
    from torch._C._dynamo.guards import dict_version
except ImportError:  # an older torch: always the full guard
    dict_version = None
