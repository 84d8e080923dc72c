#!/usr/bin/env python3
"""Architecture figures of the workspace, measured the same way every time.

Prints: the field counts of the three central actors, the size of the
production source files (median, p90, max lines; tests excluded), how many
production signatures still return `Result<_, String>`, the methods of the
server actor, the import circles inside each crate and the `impl` blocks
outside the folder of the type they extend.

An import circle is a set of top-level modules of one crate (the first
path segment under `src/`) that import each other, directly or through
others: a strongly connected component of more than one module in the
graph of `crate::` paths of production code (comments and tests excluded;
names the crate root re-exports count for the module they come from).
An `impl` block is outside its owner when it sits in another top-level
module than the one defining the type.

    python3 tools/arch-figures.py          # from the repository's root
"""

import os
import re
import statistics
import sys

CRATES = ["proto", "common", "server", "agent", "ank"]
ACTORS = [
    ("server actor", "server/src/actor/mod.rs", "AnkaiosServer"),
    ("AgentManager", "agent/src/agent_manager.rs", "AgentManager"),
    ("RuntimeManager", "agent/src/runtime_manager/mod.rs", "RuntimeManager"),
]


def is_test_file(path):
    name = os.path.basename(path)
    return (
        name == "tests.rs"
        or name.endswith("_tests.rs")
        or "/tests/" in path
        or "/benches/" in path
    )


def production_files(root):
    for crate in CRATES:
        yield from production_files_of(root, crate)


def production_files_of(root, crate):
    for folder, _, files in os.walk(os.path.join(root, crate, "src")):
        for f in files:
            path = os.path.join(folder, f)
            if f.endswith(".rs") and not is_test_file(path):
                yield path


def strip_test_modules(text):
    """The text before an inline `#[cfg(test)] mod`: production code only."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod ", text, re.M)
    return text[: m.start()] if m else text


def struct_fields(root, path, name):
    text = open(os.path.join(root, path)).read()
    m = re.search(r"pub(?:\([a-z]+\))? struct " + name + r"\b[^{;]*\{", text)
    if not m:
        return None
    depth, i, body = 1, m.end(), []
    while depth:
        c = text[i]
        depth += c == "{"
        depth -= c == "}"
        body.append(c)
        i += 1
    lines = "".join(body).splitlines()
    return sum(
        1
        for line in lines
        if re.match(r"\s*(pub(\([a-z]+\))? )?[a-z_][a-z0-9_]*\s*:", line)
    )


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    for label, path, name in ACTORS:
        print(f"fields of {label} ({name}): {struct_fields(root, path, name)}")
    sizes, string_results = [], 0
    for path in production_files(root):
        text = strip_test_modules(open(path).read())
        sizes.append(text.count("\n"))
        string_results += len(re.findall(r"Result<[^;{]*?,\s*String>", text))
    print(
        f"production files: {len(sizes)}, lines median {statistics.median(sizes):.0f}, "
        f"p90 {percentile(sizes, 90)}, max {max(sizes)}, total {sum(sizes)}"
    )
    print(f"Result<_, String> in production code: {string_results}")
    over = sum(1 for s in sizes if s > 500)
    print(f"production files over 500 lines: {over}")
    print_structure(root)


# --- module graph: import circles and impl blocks away from their owner ---

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def top_module(crate_src, path):
    """The first path segment under `src/` (`None` for lib.rs / main.rs)."""
    rel = os.path.relpath(path, crate_src)
    first = rel.split(os.sep)[0]
    if first in ("lib.rs", "main.rs"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def brace_group(text, start):
    """The text of the `{...}` group opening at `start`."""
    depth, i = 0, start
    while i < len(text):
        depth += text[i] == "{"
        depth -= text[i] == "}"
        i += 1
        if depth == 0:
            break
    return text[start + 1 : i - 1]


def top_level_names(group):
    """The first segment of each path in a `use` brace group."""
    names, depth, item = [], 0, ""
    for c in group + ",":
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            m = re.match(r"\s*(" + IDENT + ")", item)
            if m:
                names.append(m.group(1))
            item = ""
        else:
            item += c
    return names


def strip_comments(text):
    """The code without `//` comments (doc links name paths too)."""
    return re.sub(r"//[^\n]*", "", text)


def crate_paths(text):
    """Every `crate::first` segment a text names, braces resolved."""
    found = []
    for m in re.finditer(r"\bcrate::(\{|" + IDENT + ")", text):
        if m.group(1) == "{":
            found += top_level_names(brace_group(text, m.start(1)))
        else:
            found.append(m.group(1))
    return found


def root_reexports(crate_src):
    """Names the crate root re-exports, mapped to their top-level module."""
    names = {}
    for root in ("lib.rs", "main.rs"):
        path = os.path.join(crate_src, root)
        if not os.path.exists(path):
            continue
        text = strip_test_modules(open(path).read())
        for m in re.finditer(r"pub use (" + IDENT + r")::([^;]*);", text):
            inner = m.group(2)
            for name in re.findall(IDENT, inner.split("::")[-1]):
                if name not in ("self", "as"):
                    names[name] = m.group(1)
    return names


def module_graph(root, crate):
    crate_src = os.path.join(root, crate, "src")
    modules = {
        top_module(crate_src, p)
        for p in production_files_of(root, crate)
        if top_module(crate_src, p)
    }
    reexports = root_reexports(crate_src)
    edges = {m: set() for m in modules}
    for path in production_files_of(root, crate):
        here = top_module(crate_src, path)
        if here is None:
            continue
        text = strip_comments(strip_test_modules(open(path).read()))
        for name in crate_paths(text):
            target = name if name in modules else reexports.get(name)
            if target and target != here and target in modules:
                edges[here].add(target)
    return edges


def circles(edges):
    """The strongly connected components of more than one module: each is
    one import circle (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def type_owners(root, crate):
    """Type name -> set of top-level modules defining a type of that name."""
    crate_src = os.path.join(root, crate, "src")
    owners = {}
    for path in production_files_of(root, crate):
        text = strip_test_modules(open(path).read())
        for m in re.finditer(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:struct|enum|trait|union)\s+(" + IDENT + ")", text, re.M):
            owners.setdefault(m.group(1), set()).add(top_module(crate_src, path))
    return owners


def impls_away(root, crate):
    """`impl` blocks of a crate type outside the top-level module defining it."""
    crate_src = os.path.join(root, crate, "src")
    owners = type_owners(root, crate)
    away = []
    for path in production_files_of(root, crate):
        here = top_module(crate_src, path)
        text = strip_test_modules(open(path).read())
        for m in re.finditer(r"^\s*impl\b(?:\s*<[^{]*?>)?\s+([^{]*?)\s*(?:where[^{]*)?\{", text, re.M):
            head = m.group(1)
            self_ty = head.split(" for ")[-1].strip()
            name = re.sub(r"<.*", "", self_ty).split("::")[-1].strip("&' ")
            defined = owners.get(name)
            if defined and len(defined) == 1 and here not in defined:
                away.append((os.path.relpath(path, root), name, next(iter(defined))))
    return away


def actor_methods(root):
    count = 0
    for path in production_files_of(root, "server"):
        text = strip_test_modules(open(path).read())
        for m in re.finditer(r"^impl AnkaiosServer\s*\{", text, re.M):
            body = brace_group(text, m.end() - 1)
            count += len(re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?fn\s", body, re.M))
    return count


def print_structure(root):
    print(f"methods of the server actor (fn in impl AnkaiosServer): {actor_methods(root)}")
    circles_found, away = [], []
    for crate in CRATES:
        if not os.path.isdir(os.path.join(root, crate, "src")):
            continue
        graph = module_graph(root, crate)
        for component in circles(graph):
            inside = [
                f"{a}->{b}" for a in component for b in sorted(graph[a]) if b in component
            ]
            circles_found.append(f"{crate}: {{{', '.join(component)}}} via {' '.join(inside)}")
        away += impls_away(root, crate)
    print(f"import circles (modules that import each other) inside a crate: {len(circles_found)}")
    for c in circles_found:
        print(f"  {c}")
    print(f"impl blocks outside the owner's top-level module: {len(away)}")
    for path, name, owner in away:
        print(f"  {path}: impl {name} (owned by {owner})")


if __name__ == "__main__":
    main()
