"""Why a record's guard rejects a call: the first failing check of its full guard as source
text, guard variables spelled as access paths (`capture_stats`' guard_failures), with the
value the call has now and where the program read it
(`self.counter != 0 (now 1; read at model.py:12)`).
"""
import re

# a check of one guard variable (or of a further path's value `_v`): answered with the value
# the call has now
_VALUE_CHECK = re.compile(r"if (?:type\()?(s\d+|_v)\b.*: return None")


def explainer(full, env, names=None, sites=None):
    """(args, kwargs) -> the first of the guard checks `full` that fails, as source text
    (see Record.why_not); built only when a miss asks for it. `names`: constants of the
    guard spelled otherwise (the called module as `self`, types by name); `sites`: guard
    variable -> "file:line" where the monitored run first read it."""
    names, sites = names or {}, sites or {}
    paths = {}  # guard variable -> the expression it was read by, variables resolved
    for line in full:
        m = re.fullmatch(r"(s\d+) = (.*)", line)
        if m:
            paths[m[1]] = re.sub(r"\bs\d+\b", lambda v: paths.get(v[0], v[0]), m[2])

    def spell(text):  # "if <cond>: return None" -> the condition, paths spelled out
        text = " ".join(text.split())
        value = re.fullmatch(r"_v = (.*) (if .*)", text)  # a further path's value check
        if value:
            text = re.sub(r"\b_v\b", lambda _: value[1], value[2])
        text = re.sub(r"\bs\d+\b", lambda v: paths.get(v[0], v[0]), text)
        text = re.sub(r"\b_c\d+\b", lambda v: names.get(v[0], v[0]), text)
        text = re.sub(r"^if (.*): return None$", r"\1", text)
        return text if len(text) <= 300 else text[:297] + "..."

    body = []
    for i, line in enumerate(full):
        tensors = re.fullmatch(r"if not _tg\.check\((.*)\): return None", line)
        if tensors:  # which tensor, and what of it, from torch's verbose check
            names_t = [spell(v) for v in tensors[1].split(", ")]
            line = (f"_r = _tg.check_verbose({tensors[1]}, tensor_check_names={names_t!r})\n"
                    f"        if _r is not True: return str(_r)")
        elif _VALUE_CHECK.search(line):  # answered with the value the call has now
            body.append(f"_at = {i}\n        " +
                        line.replace("return None", f"return ({i}, locals())"))
            continue
        body.append(f"_at = {i}\n        " + line.replace("return None",
                                                          f"return {spell(line)!r}"))
    src = ("def explain(args, kwargs):\n    _at = -1\n    try:\n        "
           + "\n        ".join(body) + "\n    except Exception as e:\n"
           "        return (type(e).__name__, _at)\n    return None\n")
    ns = dict(env)
    exec(compile(src, "<eagerc.capture guard explanation>", "exec"), ns)

    def explain(args, kwargs):
        explain.changed = None
        why = ns["explain"](args, kwargs)
        if isinstance(why, tuple) and isinstance(why[1], dict):  # a value check failed
            at, local = why
            var = _VALUE_CHECK.search(full[at])[1]
            now = local.get(var)
            site = sites.get(var) if var != "_v" else None
            if site:  # (the value's path, where the program read it)
                explain.changed = (re.sub(r"\b_c\d+\b", lambda v: names.get(v[0], v[0]),
                                          paths.get(var, var)), site)
            text = f"{spell(full[at])} (now {_short(now)}"
            return text + (f"; read at {site})" if site else ")")
        if isinstance(why, tuple):  # the check raised: an attribute or key is gone
            name, at = why
            return f"{name} in: {spell(full[at]) if at >= 0 else '?'}"
        return why
    explain.changed = None  # of the last call: (path, "file:line") of a changed value
    return explain


def _short(value):
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__qualname__} of length {len(value)}"
    if value is not None and type(value) not in (bool, int, float, str):
        return f"a {type(value).__qualname__}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
