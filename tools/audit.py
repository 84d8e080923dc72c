#!/usr/bin/env python3
"""Offline dependency audit: checks Cargo.lock files against the RustSec
advisory snapshot committed in tools/audit/advisories.json.

    python3 tools/audit.py [LOCKFILE...]        # default: Cargo.lock fuzz/Cargo.lock
    python3 tools/audit.py --refresh DB_DIR     # rewrite the snapshot from an
                                                # advisory-db checkout (tools/audit-refresh.sh)

A registry package whose version is neither in an advisory's `patched` nor
in its `unaffected` ranges is vulnerable: the audit prints the advisory and
exits 1. Informational advisories (unmaintained, unsound, notices) are
printed as warnings and do not fail it; withdrawn ones are skipped. Path
and git packages (such as third_party/) are not registry releases and are
not checked. An advisory can be accepted in tools/audit/ignore.txt, one
`RUSTSEC-YYYY-NNNN reason` per line; the reason is required.

No network and no install: the snapshot is the database. Exit codes: 0 no
vulnerability, 1 vulnerabilities found, 2 bad input (a lockfile or the
snapshot cannot be read).
"""
import json
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tools" / "audit" / "advisories.json"
IGNORE = ROOT / "tools" / "audit" / "ignore.txt"
DEFAULT_LOCKS = [ROOT / "Cargo.lock", ROOT / "fuzz" / "Cargo.lock"]

VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def parse_version(text):
    """(major, minor, patch, pre) with missing parts as None; pre is a tuple."""
    m = VERSION.match(text.strip())
    if not m:
        raise ValueError(f"not a version: {text!r}")
    major, minor, patch, pre = m.groups()
    return (int(major), None if minor is None else int(minor), None if patch is None else int(patch),
            tuple(pre.split(".")) if pre else ())


def pre_key(pre):
    """Semver precedence of a pre-release: none ranks above any pre-release;
    numeric identifiers rank below alphanumeric ones."""
    if not pre:
        return (1,)
    return (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre))


def key(v):
    major, minor, patch, pre = v
    return (major, minor or 0, patch or 0, pre_key(pre))


def matches(version, comparator):
    """Cargo's semver comparators: =, >, >=, <, <=, ~, ^ and a bare version (^)."""
    m = re.match(r"^\s*(>=|<=|>|<|=|~|\^)?\s*(.+?)\s*$", comparator)
    op, bound_text = m.group(1) or "^", m.group(2)
    if bound_text == "*":
        return True
    bound = parse_version(bound_text)
    v, b = key(version), key(bound)
    if op == "=":
        major, minor, patch, _ = bound
        if minor is None:
            return version[0] == major
        if patch is None:
            return version[:2] == (major, minor)
        return v == b
    if op == ">":
        return v > b
    if op == ">=":
        return v >= b
    if op == "<":
        return v < b
    if op == "<=":
        return v <= b
    major, minor, patch, pre = bound
    if op == "~":
        upper = (major + 1, 0, 0, pre_key(("0",))) if minor is None else (major, minor + 1, 0, pre_key(("0",)))
        return b <= v < upper
    # caret
    if major > 0 or minor is None:
        upper = (major + 1, 0, 0, pre_key(("0",)))
    elif minor > 0 or patch is None:
        upper = (0, minor + 1, 0, pre_key(("0",)))
    else:
        upper = (0, 0, patch + 1, pre_key(("0",)))
    return b <= v < upper


def in_range(version, requirement):
    """A requirement is comma-separated comparators that must all hold."""
    return all(matches(version, c) for c in requirement.split(","))


def affected(version_text, advisory):
    version = parse_version(version_text)
    if any(in_range(version, r) for r in advisory.get("unaffected", [])):
        return False
    return not any(in_range(version, r) for r in advisory.get("patched", []))


def shown(path):
    """A path relative to the repository when it is inside it."""
    try:
        return str(pathlib.Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def registry_packages(lockfile):
    data = tomllib.loads(pathlib.Path(lockfile).read_text())
    for pkg in data.get("package", []):
        if str(pkg.get("source", "")).startswith(("registry+", "sparse+")):
            yield pkg["name"], pkg["version"]


def load_ignores():
    ignored = {}
    if IGNORE.exists():
        for line in IGNORE.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                raise ValueError(f"{IGNORE}: '{line}' needs a reason after the id")
            ignored[parts[0]] = parts[1]
    return ignored


def audit(lockfiles):
    try:
        snapshot = json.loads(SNAPSHOT.read_text())
        ignored = load_ignores()
    except (OSError, ValueError) as e:
        print(f"audit: cannot read the advisory snapshot: {e}", file=sys.stderr)
        return 2
    by_package = {}
    for adv in snapshot["advisories"]:
        by_package.setdefault(adv["package"], []).append(adv)
    vulnerable, warnings, checked = [], [], 0
    for lock in lockfiles:
        try:
            packages = sorted(set(registry_packages(lock)))
        except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
            print(f"audit: cannot read {lock}: {e}", file=sys.stderr)
            return 2
        checked += len(packages)
        for name, version in packages:
            for adv in by_package.get(name, []):
                if adv.get("withdrawn") or not affected(version, adv):
                    continue
                line = f"{shown(lock)}: {name} {version}: {adv['id']} {adv['title']}"
                if adv["id"] in ignored:
                    warnings.append(f"{line} (ignored: {ignored[adv['id']]})")
                elif adv.get("informational"):
                    warnings.append(f"{line} ({adv['informational']})")
                else:
                    patched = ", ".join(adv.get("patched", [])) or "none"
                    vulnerable.append(f"{line}; patched: {patched}")
    for w in warnings:
        print(f"audit: warning: {w}")
    for v in vulnerable:
        print(f"audit: VULNERABLE: {v}")
    db = snapshot.get("database", {})
    print(f"audit: {checked} registry packages in {len(lockfiles)} lockfile(s) checked against "
          f"{len(snapshot['advisories'])} advisories (advisory-db {db.get('commit', '?')[:12]} of "
          f"{db.get('date', '?')}): {len(vulnerable)} vulnerable, {len(warnings)} warnings")
    return 1 if vulnerable else 0


def refresh(db_dir, commit, date):
    """Rewrites the snapshot from an advisory-db checkout's crates/ folder."""
    advisories = []
    for path in sorted(pathlib.Path(db_dir, "crates").glob("*/RUSTSEC-*.md")):
        text = path.read_text()
        m = re.search(r"```toml\n(.*?)\n```", text, re.S)
        if not m:
            raise ValueError(f"{path}: no TOML front matter")
        meta = tomllib.loads(m.group(1))
        adv, versions = meta["advisory"], meta.get("versions", {})
        title = re.search(r"^# (.+)$", text[m.end():], re.M)
        entry = {"id": adv["id"], "package": adv["package"], "title": title.group(1).strip() if title else ""}
        for field in ("patched", "unaffected"):
            if versions.get(field):
                entry[field] = versions[field]
        if adv.get("informational"):
            entry["informational"] = adv["informational"]
        if adv.get("withdrawn"):
            entry["withdrawn"] = str(adv["withdrawn"])
        advisories.append(entry)
    advisories.sort(key=lambda a: (a["package"], a["id"]))
    out = {"database": {"source": "RustSec advisory-db", "commit": commit, "date": date}, "advisories": advisories}
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    with SNAPSHOT.open("w") as f:
        f.write('{"database": ' + json.dumps(out["database"]) + ',\n "advisories": [\n')
        f.write(",\n".join("  " + json.dumps(a, ensure_ascii=False) for a in advisories))
        f.write("\n]}\n")
    print(f"audit: wrote {len(advisories)} advisories to {SNAPSHOT.relative_to(ROOT)}")


def main(argv):
    if argv[:1] == ["--refresh"]:
        if len(argv) != 4:
            print("usage: audit.py --refresh DB_DIR COMMIT DATE", file=sys.stderr)
            return 2
        refresh(argv[1], argv[2], argv[3])
        return 0
    if any(a.startswith("-") for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    return audit([pathlib.Path(a) for a in argv] or [p for p in DEFAULT_LOCKS if p.exists()])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
