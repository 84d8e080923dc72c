#!/usr/bin/env python3
"""Requirement tracing for the agent's design (seed 002).

Lists every requirement id `swdd~...` of the design document and checks that
the code carries `[impl->ID]` at the code that fulfils it and at least one of
`[utest->ID]`, `[itest->ID]`, `[stest->ID]` at a test that checks it.

An id missing a tag passes only when docs/requirements.md lists it in its
"Not traced" section with a reason. Tags naming ids the design does not have
are errors too (typos). Exit status 1 on any problem.

The ids are read from the design document when it is at hand (the shared
folder beside the checkout) and kept in docs/swdd-ids.txt, so that a clean
clone can check without it; `--write-ids` refreshes that list. The ids of
Ankaios' newer design that we follow instead of the seed's behaviour
(docs/swdd-ids-ankaios-head.txt, see docs/requirements.md) are checked the
same way.

Usage: tools/trace-requirements.py [--design FILE] [--verbose] [--write-ids]
"""

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DESIGN = ROOT.parent / "shared" / "seeds" / "002_f8625c1b3add2c25.txt"
ID_LIST = ROOT / "docs" / "swdd-ids.txt"
ADOPTED = ROOT / "docs" / "swdd-ids-ankaios-head.txt"
EXCEPTIONS = ROOT / "docs" / "requirements.md"
CODE_DIRS = ["agent", "common", "server", "ank", "tests", "proto"]

ID_IN_DESIGN = re.compile(r"^`(swdd~[A-Za-z0-9_-]+(?:~\d+)?)`\s*$", re.M)
TAG = re.compile(r"\[(impl|utest|itest|stest)->(swdd~[A-Za-z0-9_-]+(?:~\d+)?)\]")
EXCEPTION = re.compile(r"^\s*[-*]\s*`(swdd~[A-Za-z0-9_-]+(?:~\d+)?)`\s*[:\u2014-]\s*(\S.*)$")


def design_ids(path):
    text = path.read_text(encoding="utf-8")
    ids = []
    for m in ID_IN_DESIGN.finditer(text):
        if m.group(1) not in ids:
            ids.append(m.group(1))
    return ids


def code_tags():
    tags = {}
    for d in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(ROOT / d):
            dirnames[:] = [n for n in dirnames if n not in ("target", ".git")]
            for f in filenames:
                if not f.endswith(".rs"):
                    continue
                p = Path(dirpath) / f
                for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                    for kind, rid in TAG.findall(line):
                        tags.setdefault(rid, {}).setdefault(kind, []).append(f"{p.relative_to(ROOT)}:{lineno}")
    return tags


def exceptions():
    """Ids of the "Not traced" section of docs/requirements.md with their reasons."""
    if not EXCEPTIONS.exists():
        return {}
    found, in_section = {}, False
    for line in EXCEPTIONS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_section = line[3:].strip().lower().startswith("not traced")
            continue
        m = EXCEPTION.match(line) if in_section else None
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", type=Path, default=None)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--write-ids", action="store_true")
    args = ap.parse_args()
    design = args.design or DEFAULT_DESIGN
    listed = ID_LIST.read_text(encoding="utf-8").split() if ID_LIST.exists() else []
    if design.exists():
        ids = design_ids(design)
        if args.write_ids:
            ID_LIST.write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
            listed = ids
        if listed != ids:
            print(f"trace: {ID_LIST.relative_to(ROOT)} is out of date; run with --write-ids", file=sys.stderr)
            return 1
    elif listed:
        ids, design = listed, ID_LIST
    else:
        print(f"trace: neither {design} nor {ID_LIST} found", file=sys.stderr)
        return 1
    adopted = ADOPTED.read_text(encoding="utf-8").split() if ADOPTED.exists() else []
    ids = ids + [i for i in adopted if i not in ids]
    tags = code_tags()
    excused = exceptions()
    problems = []
    missing_but_excused = []
    for rid in ids:
        kinds = tags.get(rid, {})
        lacks = []
        if "impl" not in kinds:
            lacks.append("impl")
        if not any(k in kinds for k in ("utest", "itest", "stest")):
            lacks.append("test")
        if not lacks:
            if rid in excused:
                problems.append(f"stale    excused  {rid}: fully traced, remove it from docs/requirements.md")
            if args.verbose:
                print(f"ok       {rid}  " + ", ".join(f"{k}:{len(v)}" for k, v in sorted(kinds.items())))
            continue
        if rid in excused:
            missing_but_excused.append((rid, lacks, excused[rid]))
        else:
            problems.append(f"missing {'+'.join(lacks):9} {rid}")
    for rid in sorted(set(tags) - set(ids)):
        where = ", ".join(w for v in tags[rid].values() for w in v)
        problems.append(f"unknown  tag      {rid} at {where}")
    for rid in sorted(set(excused) - set(ids)):
        problems.append(f"unknown  excused  {rid} in docs/requirements.md")
    traced = len(ids) - len(missing_but_excused) - sum(1 for p in problems if p.startswith("missing"))
    print(f"trace: {len(ids)} requirements in {design.name}: {traced} fully traced, "
          f"{len(missing_but_excused)} excused in docs/requirements.md, "
          f"{len(problems)} problems")
    for rid, lacks, why in missing_but_excused:
        print(f"excused  {'+'.join(lacks):9} {rid}: {why}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
