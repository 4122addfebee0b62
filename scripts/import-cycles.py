#!/usr/bin/env python3
"""Import circles between the files of a folder, for every crate of the workspace.

Usage:
    python3 scripts/import-cycles.py [--edges] [--tests] [--files] [ROOT]

ROOT is the workspace (default: the parent of this script's folder). The script reads the
library and binary roots of every crate (`crates/*/src/{lib,main}.rs`, `crates/*/src/bin/*.rs`,
`src/lib.rs`), follows their `mod name;` declarations to the files they name, and gives every
file its module path. It then reads each file's references to other modules of the same crate:

  * `use` trees (`pub use` re-exports included) starting with `crate::`, `super::`, `self::`,
    a child module's name or a name an earlier `use` bound to a module;
  * paths written in code: `crate::a::b`, `super::x`, `self::m::x`, `child::x`, `alias::x`.

A reference points at the file of the longest module prefix of its path: `crate::config::X`
points at `config/mod.rs` (X lives there or is re-exported there), `crate::config::env::X` at
`config/env.rs`. A module named on its own (`use crate::service;`) is no edge by itself; the
paths written through that name are. `mod child;` is no edge either: declaring a child is not
importing from it. A `#[macro_export]` macro named `crate::m!` points at the file that defines
it. Comments, doc comments and string literals are skipped. Inline modules
(`mod tests { use super::*; }`) belong to their file, so their `super` is the file itself.
Items under `#[cfg(test)]` (inline test modules, test-only files, test helpers) are left out
unless `--tests` is given: a unit test may drive its file through the folder's front door (a
config section's test parses a whole `Config`), which says nothing of how the code is built.

The file graph is then looked at folder by folder. The nodes of a folder are its files, the
file that owns the folder (`dir/mod.rs`, or `dir.rs` beside it, or `lib.rs` for `src/`) and
each subfolder taken whole (a subfolder and its owner file are one node). An edge between two
files becomes an edge between the nodes that hold them at that level. Every strongly connected
component of more than one node is a circle: the files in it import each other, directly or
around a loop, so neither can be read, moved or tested without the other. A `mod.rs` that
re-exports its child's item while a sibling imports that item through the parent is such a
circle (mod.rs -> child via the re-export, sibling -> mod.rs via the import, and mod.rs ->
sibling by the next re-export).

With `--files` the graph is not cut into folders: every file is a node of its crate's graph, and
a circle is a set of files that import each other around a loop, wherever they sit (a file and
a folder that only depend on each other through different files of the folder are no circle
here, as they are in the folder view).

Output: one line per circle, `crate folder: a.rs <-> b.rs <-> ...`, each edge of it with
`--edges` (the first reference that made it, as file:line), then a count. The exit status is 1
when there is any circle, so CI can run it as a check.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
KEYWORDS = {
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "Self",
}


def strip(text: str) -> str:
    """Blank out comments, string and char literals, keeping line breaks and offsets."""
    out = []
    i, n = 0, len(text)

    def blank(s: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'").match(text, i)):
            out.append(blank(m.group(0)))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_items(text: str):
    """Spans of the items under `#[cfg(test)]`, and the names of the test-only child modules."""
    spans, children = [], set()
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        i = m.end()
        # Skip further attributes.
        while (a := re.compile(r"\s*#\[").match(text, i)) is not None:
            depth, j = 1, a.end()
            while j < len(text) and depth:
                depth += (text[j] == "[") - (text[j] == "]")
                j += 1
            i = j
        semi, brace = text.find(";", i), text.find("{", i)
        if semi >= 0 and (brace < 0 or semi < brace):
            if (d := re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;").match(text, i)):
                children.add(d.group(1))
            spans.append((m.start(), semi + 1))
            continue
        if brace < 0:
            continue
        depth, j = 0, brace
        while j < len(text):
            depth += (text[j] == "{") - (text[j] == "}")
            j += 1
            if depth == 0:
                break
        spans.append((m.start(), j))
    return spans, children


class Crate:
    def __init__(self, name: str, src: Path, tests: bool = False):
        self.name = name
        self.tests = tests  # whether `#[cfg(test)]` items count
        self.test_only: set[Path] = set()
        self.src = src
        self.modules: dict[tuple, Path] = {}  # module path -> file (inline modules too)
        self.owned: dict[Path, tuple] = {}  # file -> its module path
        self.children: dict[tuple, set] = defaultdict(set)

    def load(self, root: Path, prefix: tuple) -> None:
        self.modules[prefix] = root
        self.owned[root] = prefix
        text = strip(root.read_text())
        _, test_children = test_items(text)
        for modpath, name in declared_modules(text, prefix):
            self.children[modpath].add(name)
            if modpath == prefix:  # `mod name;` at the top of this file
                child = self.child_file(root, prefix, name)
                if child is not None:
                    if name in test_children or root in self.test_only:
                        self.test_only.add(child)
                    self.load(child, prefix + (name,))

    def child_file(self, parent: Path, prefix: tuple, name: str):
        if parent.name in ("mod.rs", "lib.rs", "main.rs") or (not prefix and parent.parent.name == "bin"):
            base = parent.parent
        else:
            base = parent.parent / parent.stem
        for candidate in (base / f"{name}.rs", base / name / "mod.rs"):
            if candidate.exists():
                return candidate
        return None


def declared_modules(text: str, prefix: tuple):
    """(module, child) for every `mod child;` and `mod child {`, with inline nesting."""
    stack = []  # (name, depth at which its body opened)
    depth = 0
    decl = re.compile(r"\bmod\s+(" + IDENT + r")\s*([;{])")
    events = [(m.start(), m) for m in decl.finditer(text)]
    ei = 0
    for i, c in enumerate(text):
        while ei < len(events) and events[ei][0] == i:
            m = events[ei][1]
            current = prefix + tuple(s for s, _ in stack)
            yield current, m.group(1)
            if m.group(2) == "{":
                stack.append((m.group(1), depth + 1))
            ei += 1
        if c == "{":
            depth += 1
        elif c == "}":
            if stack and stack[-1][1] == depth:
                stack.pop()
            depth -= 1


def module_at(text: str, prefix: tuple):
    """A function from offset to the module path (inline modules included) at that offset."""
    spans = []  # (start, end, path)
    stack = []
    depth = 0
    decl = re.compile(r"\bmod\s+(" + IDENT + r")\s*\{")
    starts = {m.end() - 1: m.group(1) for m in decl.finditer(text)}
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
            if i in starts:
                stack.append((starts[i], depth, i))
        elif c == "}":
            if stack and stack[-1][1] == depth:
                name, _, start = stack.pop()
                spans.append((start, i, prefix + tuple(s for s, _, _ in stack) + (name,)))
            depth -= 1

    def at(offset: int) -> tuple:
        # The innermost span is the longest path containing the offset.
        inner = [p for s, e, p in spans if s <= offset <= e]
        return max(inner, key=len) if inner else prefix

    return at


def use_paths(tree: str):
    """Every full path of a `use` tree, e.g. `a::{b, c::{d as e, *}}`, with the name it binds."""
    tree = re.sub(r"\s+as\s+", "@", tree)  # `d as e` -> `d@e`
    tree = re.sub(r"\s+", "", tree)

    def split_top(s: str):
        parts, depth, cur = [], 0, ""
        for ch in s:
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        return parts + [cur] if cur else parts

    def walk(prefix: list, s: str):
        if not s:
            return
        if s.endswith("}") and "{" in s:
            brace = s.find("{")
            segs = prefix + [p for p in s[:brace].split("::") if p]
            for part in split_top(s[brace + 1 : -1]):
                yield from walk(segs, part)
            return
        body, _, alias = s.partition("@")
        segs = prefix + [p for p in body.split("::") if p]
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        yield segs, alias or (segs[-1] if segs else None)

    yield from walk([], tree)


class Ref:
    """One reference from a file to a module of its crate."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def scan(crate: Crate):
    """Every reference of a crate's files to the crate's modules, as `Ref`s.

    Also fills `crate.bindings`: (module, name) -> (written path, absolute path or None) for
    every name a `use` binds, so that a reference through a re-export can be told apart from
    one to the definition."""
    refs = []
    crate.bindings = {}
    # `#[macro_export]` macros live at the crate root whatever file defines them: `crate::m!`
    # points at that file, not at lib.rs.
    macros = {}
    for path in crate.owned:
        for m in re.finditer(r"macro_rules!\s*(" + IDENT + r")", strip(path.read_text())):
            macros.setdefault(m.group(1), path)
    for path, prefix in crate.owned.items():
        if path in crate.test_only and not crate.tests:
            continue
        text = strip(path.read_text())
        if not crate.tests:  # blank the test items out: they are no edges
            for s, e in test_items(text)[0]:
                text = text[:s] + "".join(c if c == "\n" else " " for c in text[s:e]) + text[e:]
        at = module_at(text, prefix)
        aliases: dict[tuple, dict] = defaultdict(dict)  # module -> name -> module path

        def line(offset: int) -> int:
            return text.count("\n", 0, offset) + 1

        def resolve_start(segs: list, module: tuple):
            """An absolute path for `segs` written in `module`, or None if outside the crate."""
            if not segs:
                return None
            head = segs[0]
            if head == "crate":
                return list(segs[1:])
            if head in ("self", "super"):
                base, rest = list(module), list(segs)
                while rest and rest[0] in ("self", "super"):
                    if rest[0] == "super":
                        if not base:
                            return None
                        base.pop()
                    rest.pop(0)
                return base + rest
            if head in crate.children.get(module, ()):
                return list(module) + list(segs)
            bound = aliases[module].get(head)
            if bound is not None:
                return list(bound) + list(segs[1:])
            return None

        def target(absolute: list):
            """The longest module prefix's file, and that prefix's length."""
            for k in range(len(absolute), -1, -1):
                if tuple(absolute[:k]) in crate.modules:
                    return crate.modules[tuple(absolute[:k])], k
            return None, 0

        # `use` declarations.
        use_spans = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            use_spans.append((m.start(), m.end()))
            module = at(m.start())
            for segs, binding in use_paths(m.group(1)):
                glob = bool(segs) and segs[-1] == "*"
                if glob:
                    segs = segs[:-1]
                absolute = resolve_start(segs, module)
                if binding and not glob:
                    crate.bindings[(module, binding)] = (path, segs, absolute)
                if absolute is None:
                    continue
                file, k = target(absolute)
                if file is None:
                    continue
                if k == len(absolute) and not glob:  # a module named on its own
                    if binding:
                        aliases[module][binding] = tuple(absolute)
                    continue
                refs.append(Ref(file=path, line=line(m.start()), kind="use", span=(m.start(), m.end()),
                                written=segs, absolute=absolute, target=file, k=k, module=module,
                                alias=binding, glob=glob))

        # Paths written in code.
        path_re = re.compile(r"(?<![\w:$])(" + IDENT + r")((?:\s*::\s*" + IDENT + r")+)")
        for m in path_re.finditer(text):
            if any(s <= m.start() < e for s, e in use_spans):
                continue
            segs = [m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()]
            if segs[0] in KEYWORDS:
                continue
            if segs[0] == "crate" and len(segs) == 2 and text[m.end():m.end() + 1] == "!":
                if segs[1] in macros:
                    refs.append(Ref(file=path, line=line(m.start()), kind="path",
                                    span=(m.start(), m.end()), written=segs, absolute=segs[1:],
                                    target=macros[segs[1]], k=1, module=at(m.start()),
                                    alias=None, glob=False))
                continue
            module = at(m.start())
            absolute = resolve_start(segs, module)
            if absolute is None:
                continue
            file, k = target(absolute)
            if file is None or k == len(absolute):
                continue
            refs.append(Ref(file=path, line=line(m.start()), kind="path", span=(m.start(), m.end()),
                            written=segs, absolute=absolute, target=file, k=k, module=module,
                            alias=None, glob=False))
    return refs


def owner(crate: Crate, folder: Path):
    if folder == crate.src:
        for root in ("lib.rs", "main.rs"):
            if (folder / root).exists():
                return folder / root
        return None
    for candidate in (folder / "mod.rs", folder.parent / f"{folder.name}.rs"):
        if candidate in crate.owned:
            return candidate
    return None


def node_at(crate: Crate, folder: Path, file: Path):
    """The node that holds `file` in `folder`'s graph, or None if it lies outside."""
    own = owner(crate, folder)
    if file == own:
        return own.relative_to(crate.src).as_posix()
    try:
        rel = file.relative_to(folder)
    except ValueError:
        return None
    parts = rel.parts
    if len(parts) == 1:
        sub = folder / file.stem
        if sub.is_dir() and owner(crate, sub) == file:
            return sub.relative_to(crate.src).as_posix() + "/"
        return file.relative_to(crate.src).as_posix()
    return (folder / parts[0]).relative_to(crate.src).as_posix() + "/"


def sccs(nodes, graph):
    index, low, onstack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        onstack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def crates(root: Path, tests: bool = False):
    found = []
    for src in sorted(root.glob("crates/*/src")) + [root / "src"]:
        if not src.is_dir():
            continue
        name = src.parent.name if src.parent != root else "uidgen"
        roots = [src / "lib.rs", src / "main.rs"] + sorted((src / "bin").glob("*.rs"))
        for r in roots:
            if r.exists():
                label = name if r.name == "lib.rs" else f"{name} ({r.relative_to(src)})"
                crate = Crate(label, src, tests)
                crate.load(r, ())
                found.append(crate)
    return found


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_edges = "--edges" in sys.argv
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    sys.setrecursionlimit(10000)
    circles = 0
    for crate in crates(root, "--tests" in sys.argv):
        edges = [(r.file, r.target, r.line) for r in scan(crate)]
        if "--files" in sys.argv:
            graph, why = defaultdict(set), {}
            for a, b, ln in edges:
                if a != b:
                    graph[a].add(b)
                    why.setdefault((a, b), f"{a.relative_to(crate.src).as_posix()}:{ln}")
            nodes = set(graph) | {b for bs in graph.values() for b in bs}
            for comp in sccs(nodes, graph):
                if len(comp) < 2:
                    continue
                circles += 1
                names = [f.relative_to(crate.src).as_posix() for f in comp]
                print(f"{crate.name}: {' <-> '.join(names)}")
                if show_edges:
                    for (a, b), site in sorted(why.items()):
                        if a in comp and b in comp:
                            print(f"    {a.relative_to(crate.src).as_posix()} -> "
                                  f"{b.relative_to(crate.src).as_posix()}  ({site})")
            continue
        folders = sorted({f.parent for f in crate.owned} | {crate.src})
        for folder in folders:
            graph = defaultdict(set)
            why = {}
            nodes = set()
            for a, b, ln in edges:
                na, nb = node_at(crate, folder, a), node_at(crate, folder, b)
                if na is None or nb is None or na == nb:
                    continue
                nodes.update((na, nb))
                graph[na].add(nb)
                why.setdefault((na, nb), f"{a.relative_to(crate.src).as_posix()}:{ln}")
            for comp in sccs(nodes, graph):
                if len(comp) < 2:
                    continue
                circles += 1
                where = folder.relative_to(crate.src).as_posix()
                print(f"{crate.name} src/{'' if where == '.' else where + '/'}: {' <-> '.join(comp)}")
                if show_edges:
                    members = set(comp)
                    for (na, nb), site in sorted(why.items()):
                        if na in members and nb in members:
                            print(f"    {na} -> {nb}  ({site})")
    print(f"{circles} circle(s)")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
