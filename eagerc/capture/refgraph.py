"""RefGraph: the objects a monitored run touched and the references between them (paper §4.1).

A `ShadowNode` stands for one Python object; node 0 stands for the external state (the
arguments, the called object, module globals, closure cells). A node keeps a list of
`ShadowVersion`s: version 0 holds the references that existed when the run started, each
in-place update (`bump`) appends a version. A reference edge is a `Relation` (kind, key) from a
version to a node, e.g. ("attr", "scale"), ("item", 0), ("global", "torch").

Nodes are created lazily, only for objects the program reads from outside or creates and
stores outside, so guards cover exactly what the run depended on. Containers are expanded
eagerly when first reached (their elements can be read implicitly: iteration, unpacking,
`len`); attributes only when read.

    >>> g = RefGraph()
    >>> x = [1, 2]
    >>> n = g.read(g.root, Relation("args", 0), x)
    >>> sorted(r.key for r in n.versions[0].refs)
    [0, 1]
"""
from typing import Any, NamedTuple

_CONTAINERS = (list, tuple, dict)


class Relation(NamedTuple):
    """How a holder refers to a held object: kind in args, kw, fn, const, attr, item, global,
    cell, return; key is the attribute name, index, dict key or global name."""

    kind: str
    key: Any = None


class ShadowVersion:
    __slots__ = ("refs",)

    def __init__(self, refs=None):
        self.refs = dict(refs or {})  # Relation -> ShadowNode, in the order they were made


class ShadowNode:
    """One object of the run. `new` marks objects created by the run itself."""

    __slots__ = ("node_id", "obj", "versions", "new", "written", "rewrite")

    def __init__(self, node_id, obj, new):
        self.node_id = node_id
        self.obj = obj  # a strong reference keeps id(obj) unique for the whole run
        self.versions = [ShadowVersion()]
        self.new = new
        self.written = {}  # Relation -> True (set) / False (deleted), in write order
        self.rewrite = False  # updated by a native InPlace call: rebuild its whole content

    def __repr__(self):
        return f"SN#{self.node_id}({type(self.obj).__name__}, v{len(self.versions) - 1})"


def expandable(obj):
    """Whether a node for `obj` gets its element edges when it is first reached."""
    return isinstance(obj, _CONTAINERS) and not _is_size(obj)


def _is_size(obj):
    return type(obj).__name__ == "Size" and type(obj).__module__ == "torch"


def contents(obj):
    """(Relation, element) pairs of a container: the references it holds right now."""
    if isinstance(obj, dict):
        return [(Relation("item", k), dict.__getitem__(obj, k)) for k in dict.keys(obj)]
    return [(Relation("item", i), v) for i, v in enumerate(obj)]


class RefGraph:
    """Nodes by id(object); node 0 is the external state. See the module docstring."""

    def __init__(self):
        self.sn = [ShadowNode(0, None, new=False)]
        self._by_obj = {}
        self.on_external = None  # (node, holder, rel) of each node made for outside state
        self.site_of = None  # () -> "file:line" of the program's current instruction
        self.sites = {}  # (holder node_id, Relation) from outside -> where it was first read

    @property
    def root(self):
        return self.sn[0]

    def get_node_by_var(self, obj):
        return self._by_obj.get(id(obj))

    def get_node_by_id(self, node_id):
        return self.sn[node_id]

    def _make(self, obj, new):
        node = ShadowNode(len(self.sn), obj, new)
        self.sn.append(node)
        self._by_obj[id(obj)] = node
        return node

    def new_node(self, obj):
        """The node of `obj`, creating it as an object made by the run when it has none."""
        node = self._by_obj.get(id(obj))
        return node if node is not None else self._make(obj, new=True)

    def read(self, holder, rel, obj, expand=True):
        """The program read `obj` through `holder`'s reference `rel` (paper §5.3.2, read rule).

        When the last version already holds that reference, nothing changes; otherwise the
        reference existed since the run began, so it is added to every version of `holder`.
        """
        node = self._by_obj.get(id(obj))
        last = holder.versions[-1].refs
        if last.get(rel) is not None and (node is None or last[rel] is node):
            return last[rel]
        if node is None:
            node = self._make(obj, new=holder.new)
            if not node.new and self.on_external is not None:
                self.on_external(node, holder, rel)

            if not node.new and expand and expandable(obj):
                for r, item in contents(obj):
                    self.read(node, r, item)
        if rel in holder.written:
            return node  # the reference was made by this run: it is no external read
        if not holder.new and self.site_of is not None:
            self.sites.setdefault((holder.node_id, rel), self.site_of())
        for version in holder.versions:
            version.refs.setdefault(rel, node)
        return node

    def write(self, holder, rel, obj, delete=False):
        """The program stored `obj` into `holder` (or deleted the reference): a new version."""
        self.bump(holder)
        holder.written[rel] = not delete
        if delete:
            holder.versions[-1].refs.pop(rel, None)
        else:
            holder.versions[-1].refs[rel] = self.new_node(obj)

    def bump(self, node):
        """An in-place update of `node`: a new version holding the references still there."""
        node.versions.append(ShadowVersion(node.versions[-1].refs))

    def search(self, version, first_version_only=None):
        """Algorithm 1's Search from node 0 over the references of `version` (0 or -1)."""
        result, queue, seen = [self.root], [self.root], {0}
        while queue:
            cur = queue.pop(0)
            for node in cur.versions[version].refs.values():
                if node.node_id not in seen:
                    seen.add(node.node_id)
                    queue.append(node)
                    result.append(node)
        return result

    def guard_nodes(self):
        """Nodes reachable from the external state through version-0 references."""
        return self.search(0)

    def mock_nodes(self):
        """New objects reachable through last-version references, plus updated inputs."""
        initial = self.search(0)
        initial_ids = {n.node_id for n in initial}
        final = self.search(-1)
        out = [n for n in final if n.node_id not in initial_ids]
        out += [n for n in initial if len(n.versions) != 1]
        return out
