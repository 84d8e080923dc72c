#!/usr/bin/env python3
"""Architecture figures of the workspace, measured the same way every time.

Prints: the field counts of the three central actors, the size of the
production source files (median, p90, max lines; tests excluded), and how
many production signatures still return `Result<_, String>`.

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


if __name__ == "__main__":
    main()
