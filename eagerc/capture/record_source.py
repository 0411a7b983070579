"""A record's guard and mock as generated Python source: the guard plan (guard_plan.py) and
the mock's lines (mock.py) become straight-line functions, compiled once per record.
"""
import re

from .guards import grad_mode, tensor_guard
from .record_cache import Record
from .version_guard import StaticVersionGuard, dict_version


def make_record(mon, plan, out_slots, consts, mock_lines, gm, written):
    env = dict(consts.env)
    env["_grad"] = grad_mode
    env["_getattr"] = getattr
    full, fast = list(plan.full), list(plan.fast)
    if plan.tensors:
        env["_tg"] = tensor_guard([t for _, t in plan.tensors], plan.strides,
                                  [plan.dynamic.get(v, ()) for v, _ in plan.tensors])
        tg = f"if not _tg.check({', '.join(v for v, _ in plan.tensors)}): return None"
        full.append(tg)
        fast.append(tg)
    if plan.shape_line:
        full.append(plan.shape_line)
        fast.append(plan.shape_line)
    ret = f"({', '.join(out_slots)}{',' if out_slots else ''})"
    static = ", ".join(plan.static) + ("," if plan.static else "")
    # The fast path unpacks only the static variables it reads (a large model has hundreds;
    # unpacking them all cost ~2 us per call).
    words = set(re.findall(r"\bs\d+\b", "\n".join(fast) + ret))
    used = [v for v in plan.static if v in words]
    used_t = ", ".join(used) + ("," if used else "")
    versioned = [(plan.var_of[n], d) for n, d in plan.versioned]
    src = ("def guard_full(args, kwargs):\n    try:\n        "
           + "\n        ".join(full)
           + f"\n        return {ret}, ({static})\n    except Exception:\n        return None\n"
           f"def guard_fast(args, kwargs, ST):\n    try:\n        ({used_t}) = ST\n        "
           + "\n        ".join(fast)
           + f"\n        return {ret}\n    except Exception:\n        return None\n"
           f"def fast_state(ST):\n    ({static}) = ST\n    return ({used_t})\n"
           f"def versioned_dicts(ST):\n    ({static}) = ST\n"
           f"    return ({', '.join(d for _, d in versioned)}{',' if versioned else ''})\n")
    if mock_lines is not None:
        src += "def mock(S):\n    " + "\n    ".join(mock_lines) + "\n"
    exec(compile(src, "<eagerc.capture record>", "exec"), env)
    # Writes of the mock to the static part change dict versions on every call: those
    # records always take the full guard.
    volatile = any(plan.var_of.get(n) in plan.static for n in written)
    guard = StaticVersionGuard(env["guard_full"], env["guard_fast"], env["fast_state"],
                               env["versioned_dicts"],
                               enabled=not volatile and dict_version is not None)
    record = Record(guard, env.get("mock"), gm, mon.stopped, src)
    record._full = (full, env, _explain_names(mon, env), plan.sites)
    return record


def _explain_names(mon, env):
    """Constants of the guard as a report spells them: the called module (or the module
    of a called bound method) as `self`, classes by name."""
    called = getattr(mon.fn, "__self__", mon.fn)
    names = {}
    for name, obj in env.items():
        if not name.startswith("_c"):
            continue
        if obj is called:
            names[name] = "self"
        elif isinstance(obj, type):
            names[name] = obj.__qualname__
        elif obj is None or type(obj) in (bool, int, str):
            names[name] = repr(obj)
        elif type(obj) is tuple and obj and obj[0] == "array":  # guards.array_differs'
            names[name] = "its values when recorded"
        elif type(obj).__name__ == "function":
            names[name] = obj.__name__
    return names
