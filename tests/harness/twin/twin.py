#!/usr/bin/env python3
"""Twin harness: one scenario, run against two builds, observed as a user sees it.

A scenario (tests/twin/NAME.twin) is a list of steps: start, stop or kill -9
a daemon, apply or delete with `ank`, podman actions, waits and observations.
Each run records a transcript of what a user observes (`ank get workloads`,
`ank get state`, `podman ps -a`, `ank logs`, exit codes of commands), with
everything that changes from run to run normalised (ports, temporary paths,
ids, hashes, times, the run tag in agent and image names). The reference's
transcript is committed next to the scenario as NAME.golden; ours is compared
with it.

Only the stdlib is used. See tests/twin/README.md.
"""

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SCEN_DIR = os.path.join(ROOT, "tests", "twin")


class ScenarioError(Exception):
    """A scenario file that cannot be run as written."""


# ---------------------------------------------------------------- parsing


class Scenario:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.description = []
        self.long = False
        self.files = {}
        self.steps = []  # (line number, text, argv)


def parse_scenario(path):
    name = os.path.basename(path)[: -len(".twin")]
    sc = Scenario(name, path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    in_header = True
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        if not line:
            continue
        if line.startswith("#"):
            if in_header:
                sc.description.append(line.lstrip("#").strip())
            continue
        in_header = False
        m = re.match(r"^file\s+(\S+)\s+<<(\w+)$", line)
        if m:
            fname, end = m.group(1), m.group(2)
            body = []
            while i < len(lines) and lines[i] != end:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ScenarioError(f"{path}: file {fname}: no closing {end}")
            i += 1
            sc.files[fname] = "\n".join(body) + "\n"
            continue
        try:
            argv = shlex.split(line)
        except ValueError as e:
            raise ScenarioError(f"{path}:{i}: {e}") from e
        if argv == ["set", "long"]:
            sc.long = True
            continue
        if argv[0] not in STEPS:
            raise ScenarioError(f"{path}:{i}: unknown step {argv[0]!r}")
        sc.steps.append((i, line, argv))
    return sc


# ---------------------------------------------------------------- normalising

HEX64 = re.compile(r"\b[0-9a-f]{64}\b")
HEX_ID = re.compile(r"\b[0-9a-f]{12,63}\b")
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?( [A-Z]{3,4})?")
# the hash in a container name `<workload>.<hash>.<agent>`
SHORT_HASH = re.compile(r"(?<=\.)[0-9a-f]{7,64}(?=\.)")
# how many attempts a create took so far depends on the backoff's jitter
RETRY = re.compile(r"\b(Retry|retry|attempt|Attempt) \d+")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Normaliser:
    def __init__(self, run):
        self.run = run

    def text(self, s):
        s = ANSI.sub("", s)
        s = s.replace(self.run.work, "WORK")
        s = s.replace(f"127.0.0.1:{self.run.port}", "127.0.0.1:PORT")
        s = s.replace(f"localhost:{self.run.port}", "localhost:PORT")
        s = UUID.sub("UUID", s)
        s = SHORT_HASH.sub("HASH", s)
        s = RETRY.sub(r"\1 N", s)
        s = HEX64.sub("HASH", s)
        s = HEX_ID.sub("ID", s)
        s = ISO_TIME.sub("TIME", s)
        s = s.replace(self.run.tag, "")
        return s

    def container_name(self, name):
        # <workload>.<hash>.<agent>
        parts = name.split(".")
        if len(parts) == 3:
            parts[1] = "HASH"
        return self.text(".".join(parts))


def parse_table(out):
    """Rows of a table printed by `ank get ...`: columns cut at the header's
    word starts (a column starts where the header has a word after 2+ spaces)."""
    lines = [ln.rstrip() for ln in out.split("\n") if ln.strip()]
    if not lines:
        return [], []
    header = lines[0]
    starts = [0] + [m.end() for m in re.finditer(r"\s{2,}", header)]
    cols = []
    for k, st in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        cols.append(header[st:end].strip())
    rows = []
    for ln in lines[1:]:
        cells = []
        for k, st in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else None
            cells.append(ln[st:end].strip() if end else ln[st:].strip())
        rows.append(cells)
    return cols, rows


def normalise_state(obj, path=()):
    """`ank get state -o json`, with ids and machine figures replaced."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            nk = "HASH" if HEX64.fullmatch(k) else k
            if k in ("cpuUsage", "freeMemory") or (path and path[-1] in ("cpuUsage", "freeMemory")):
                out[nk] = "N"
                continue
            out[nk] = normalise_state(v, path + (k,))
        return out
    if isinstance(obj, list):
        return [normalise_state(v, path) for v in obj]
    return obj


# ---------------------------------------------------------------- running


class Daemon:
    def __init__(self, kind, name, proc, log):
        self.kind = kind
        self.name = name
        self.proc = proc
        self.log = log


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Run:
    """One scenario against one build."""

    def __init__(self, sc, bindir, keep=False, verbose=False):
        self.sc = sc
        self.bindir = os.path.abspath(bindir)
        self.tag = "-tw" + secrets.token_hex(3)
        self.port = free_port()
        self.work = tempfile.mkdtemp(prefix=f"twin-{sc.name}-")
        self.keep = keep
        self.verbose = verbose
        self.daemons = {}  # key ("server" | agent name) -> Daemon
        self.agents = set()  # actual agent names started
        self.images = set()  # images the scenario tagged
        self.out = []
        self.containers = {}  # container id -> ordinal label
        self.norm = Normaliser(self)
        self.env = dict(os.environ)
        self.env["TMPDIR"] = self.work
        self.env.pop("ANK_SERVER_URL", None)
        self.env["RUST_LOG"] = self.env.get("TWIN_RUST_LOG", "info")
        self.t0 = time.monotonic()
        self.tls = False

    # -- helpers

    def sub(self, s):
        return (
            s.replace("{RUN}", self.tag)
            .replace("{PORT}", str(self.port))
            .replace("{WORK}", self.work)
            .replace("{URL}", f"http://127.0.0.1:{self.port}")
            .replace("{HTTPS_URL}", f"https://127.0.0.1:{self.port}")
        )

    def emit(self, line):
        self.out.append(line.rstrip())

    def log(self, msg):
        if self.verbose:
            print(f"[{self.sc.name} {time.monotonic() - self.t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def bin(self, name):
        return os.path.join(self.bindir, name)

    def tls_args(self, who):
        c = os.path.join(self.work, "certs")
        return ["--ca_pem", f"{c}/ca.pem", "--crt_pem", f"{c}/{who}.pem", "--key_pem", f"{c}/{who}-key.pem"]

    def ank(self, args, timeout=15):
        if self.tls:
            conn = ["-s", f"https://127.0.0.1:{self.port}"] + self.tls_args("ank")
        else:
            conn = ["-k", "-s", f"http://127.0.0.1:{self.port}"]
        argv = [self.bin("ank")] + conn + args
        try:
            p = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
            return p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            return "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), ""

    def podman(self, args, timeout=60):
        p = subprocess.run(["podman"] + args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def wait_listen(self, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def start_daemon(self, key, kind, argv):
        d = self.daemons.get(key)
        if d and d.proc.poll() is None:
            raise ScenarioError(f"{key} already runs")
        logpath = os.path.join(self.work, f"{key}.log")
        log = open(logpath, "a")
        log.write(f"--- start {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(argv, cwd=self.work, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.daemons[key] = Daemon(kind, key, proc, logpath)
        log.close()
        return proc

    def stop_daemon(self, key, sig):
        d = self.daemons.get(key)
        if not d or d.proc.poll() is not None:
            return
        d.proc.send_signal(sig)
        try:
            d.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait()

    def agent_name(self, logical):
        return logical + self.tag

    # -- observations

    def workloads_rows(self):
        rc, out, err = self.ank(["get", "workloads"])
        if rc != 0:
            return None, rc, out + err
        _, rows = parse_table(out)
        return rows, rc, ""

    def observe_workloads(self):
        rows, rc, err = self.workloads_rows()
        if rows is None:
            self.emit(f"ank get workloads: exit {rc}")
            for ln in self.norm.text(err).strip().split("\n"):
                self.emit("  " + ln)
            return
        norm = sorted(" | ".join(self.norm.text(c) for c in r) for r in rows)
        if not norm:
            self.emit("(no workloads)")
        for r in norm:
            self.emit(r)

    def observe_state(self, args):
        rc, out, err = self.ank(["get", "state", "-o", "json"] + args)
        if rc != 0:
            self.emit(f"ank get state: exit {rc}")
            for ln in self.norm.text(err + out).strip().split("\n"):
                self.emit("  " + ln)
            return
        try:
            obj = json.loads(out)
        except ValueError:
            self.emit("ank get state: not JSON:")
            for ln in self.norm.text(out).strip().split("\n"):
                self.emit("  " + ln)
            return
        text = json.dumps(normalise_state(obj), indent=1, sort_keys=True)
        for ln in self.norm.text(text).split("\n"):
            self.emit(ln)

    def containers_of_run(self):
        found = []
        for agent in sorted(self.agents):
            rc, out, _ = self.podman(["ps", "-a", "--format", "json", "--filter", f"label=agent={agent}"])
            if rc != 0:
                continue
            try:
                items = json.loads(out or "[]")
            except ValueError:
                continue
            for c in items:
                names = c.get("Names") or []
                found.append((names[0] if names else "?", c))
        found.sort(key=lambda x: (x[0], x[1].get("Created", 0)))
        return found

    def container_label(self, cid):
        if cid not in self.containers:
            self.containers[cid] = f"C{len(self.containers) + 1}"
        return self.containers[cid]

    def observe_podman(self):
        rows = []
        for name, c in self.containers_of_run():
            state = c.get("State", "?")
            line = f"{self.norm.container_name(name)} {state}"
            if state == "exited":
                line += f" ({c.get('ExitCode')})"
            line += " " + self.container_label(c.get("Id", ""))
            rows.append(line)
        if not rows:
            self.emit("(no containers)")
        for r in rows:
            self.emit(r)

    def observe_logs(self, args):
        rc, out, err = self.ank(["logs"] + args, timeout=20)
        self.emit(f"exit {rc}")
        lines = [ln for ln in self.norm.text(out).rstrip("\n").split("\n") if ln]
        names = [a for a in args if not a.startswith("-")]
        if len(names) > 1:
            # the workloads' lines interleave as they come: sorted
            lines.sort()
        for ln in lines:
            self.emit("  " + ln)
        if rc != 0:
            for ln in self.norm.text(err).strip().split("\n"):
                if ln:
                    self.emit("  ! " + ln)

    def observe_agents(self):
        rc, out, err = self.ank(["get", "agents"])
        if rc != 0:
            self.emit(f"ank get agents: exit {rc}")
            return
        cols, rows = parse_table(out)
        keep = [k for k, c in enumerate(cols) if c not in ("CPU USAGE", "FREE MEMORY")]
        norm = sorted(" | ".join(self.norm.text(r[k]) for k in keep) for r in rows)
        self.emit(" | ".join(cols[k] for k in keep))
        for r in norm:
            self.emit(r)

    def observe_daemons(self):
        for key in sorted(self.daemons):
            d = self.daemons[key]
            rc = d.proc.poll()
            self.emit(f"{self.norm.text(key)}: {'running' if rc is None else f'exited {rc}'}")

    # -- conditions

    def condition(self, what, args):
        """(met, description) of a wait_until condition."""
        if what == "workloads":
            rows, _, _ = self.workloads_rows()
            if rows is None:
                return False
            states = {r[0]: (r[3] if len(r) > 3 else "") for r in rows}
            for a in args:
                n, _, want = a.partition("=")
                have = states.get(n)
                if want == "absent":
                    if have is not None:
                        return False
                elif have is None or not have.startswith(want):
                    return False
            return True
        if what == "podman":
            cs = {}
            for name, c in self.containers_of_run():
                cs.setdefault(name.split(".")[0], []).append(c.get("State"))
            for a in args:
                n, _, want = a.partition("=")
                have = cs.get(n, [])
                if want == "absent":
                    if have:
                        return False
                elif want not in have:
                    return False
            return True
        if what == "daemon":
            key, want = args[0], args[1]
            key = "server" if key == "server" else self.agent_name(key)
            d = self.daemons.get(key)
            if not d:
                return False
            running = d.proc.poll() is None
            return running if want == "running" else not running
        if what == "logs":
            # logs WORKLOAD TEXT: `ank logs WORKLOAD` prints TEXT
            rc, out, _ = self.ank(["logs", args[0]], timeout=10)
            return rc == 0 and args[1] in out
        raise ScenarioError(f"unknown condition {what}")

    # -- the run

    def execute(self):
        for fname, body in self.sc.files.items():
            path = os.path.join(self.work, fname)
            with open(path, "w") as f:
                f.write(self.sub(body))
        for lineno, text, argv in self.sc.steps:
            argv = [self.sub(a) for a in argv]
            self.log(text)
            try:
                STEPS[argv[0]](self, argv[1:], text)
            except ScenarioError as e:
                raise ScenarioError(f"{self.sc.path}:{lineno}: {e}") from e
        return self.out

    def cleanup(self):
        for key in list(self.daemons):
            self.stop_daemon(key, signal.SIGKILL)
        # twice: a `podman run` the killed agent had started may still end
        for attempt in range(2):
            if attempt:
                time.sleep(2)
            for agent in self.agents:
                rc, out, _ = self.podman(["ps", "-a", "-q", "--filter", f"label=agent={agent}"])
                ids = out.split()
                if ids:
                    self.podman(["rm", "-f", "-t", "0"] + ids, timeout=120)
        for agent in self.agents:
            rc, out, _ = self.podman(["volume", "ls", "-q"])
            vols = [v for v in out.split() if v.endswith("." + agent + ".config") or agent in v]
            if vols:
                self.podman(["volume", "rm", "-f"] + vols)
        for img in self.images:
            self.podman(["rmi", "-f", img])
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------- steps


def step_server(run, args, text):
    op = args[0]
    if op == "start":
        extra = args[1:]
        tls = "--tls" in extra
        extra = [a for a in extra if a != "--tls"]
        argv = [run.bin("ank-server"), "-a", f"127.0.0.1:{run.port}"] + (run.tls_args("ank-server") if tls else ["-k"]) + extra
        run.start_daemon("server", "server", argv)
        if not run.wait_listen():
            run.log("server does not listen")
    elif op == "stop":
        run.stop_daemon("server", signal.SIGTERM)
    elif op == "kill":
        run.stop_daemon("server", signal.SIGKILL)
    else:
        raise ScenarioError(f"server {op}?")


def step_agent(run, args, text):
    op, logical = args[0], args[1]
    name = run.agent_name(logical)
    if op in ("start", "start-raw"):
        run.agents.add(name)
        extra = args[2:]
        tls = "--tls" in extra
        extra = [a for a in extra if a != "--tls"]
        if op == "start" and tls:
            argv = [run.bin("ank-agent"), "-n", name, "-s", f"https://127.0.0.1:{run.port}"] + run.tls_args("ank-agent") + extra
        elif op == "start":
            argv = [run.bin("ank-agent"), "-n", name, "-s", f"http://127.0.0.1:{run.port}", "-k"] + extra
        else:
            argv = [run.bin("ank-agent")] + extra
        run.start_daemon(name, "agent", argv)
    elif op == "stop":
        run.stop_daemon(name, signal.SIGTERM)
    elif op == "kill":
        run.stop_daemon(name, signal.SIGKILL)
    else:
        raise ScenarioError(f"agent {op}?")


def step_ank(run, args, text):
    """ank ARGS: runs `ank` and records its exit code (and, with `ank -o`,
    its output)."""
    show = False
    if args and args[0] == "-o":
        show = True
        args = args[1:]
    rc, out, err = run.ank(args, timeout=60)
    run.emit(f"$ ank {run.norm.text(' '.join(args))}")
    run.emit(f"exit {rc}")
    if show:
        for ln in run.norm.text(out + err).rstrip("\n").split("\n"):
            if ln.strip():
                run.emit("  " + ln.rstrip())


def step_sh(run, args, text):
    """sh [-o] COMMAND: a shell command in the run's folder (podman actions,
    file modes); its exit code is recorded, its output with -o."""
    raw = text.split(None, 1)[1]
    show = raw.startswith("-o ")
    if show:
        raw = raw[3:].lstrip()
    cmd = run.sub(raw).replace("{TOOLS}", HERE)
    for m in re.finditer(r"podman\s+tag\s+\S+\s+(\S+)", cmd):
        run.images.add(m.group(1))
    p = subprocess.run(["bash", "-c", cmd], cwd=run.work, env=run.env, capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    run.emit(f"$ {raw}")
    run.emit(f"exit {p.returncode}")
    if show:
        for ln in run.norm.text(p.stdout + p.stderr).rstrip("\n").split("\n"):
            if ln.strip():
                run.emit("  " + ln.rstrip())


def step_tls(run, args, text):
    """tls AGENT...: certificates in WORK/certs (tests/harness/twin/make-certs.sh),
    the agents' one for the agents named; `ank` uses them from now on."""
    agents = [run.agent_name(a) for a in args]
    p = subprocess.run(["bash", os.path.join(HERE, "make-certs.sh"), os.path.join(run.work, "certs")] + agents,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise ScenarioError(f"make-certs.sh failed: {p.stderr}")
    run.tls = True


def step_sleep(run, args, text):
    time.sleep(float(args[0]))


def step_wait_until(run, args, text):
    """wait_until SECONDS CONDITION ARGS...: polls every 0.5 s; records
    whether the condition was met in time."""
    timeout = float(args[0])
    end = time.monotonic() + timeout
    while True:
        if run.condition(args[1], args[2:]):
            run.emit(f"wait_until {' '.join(args[1:])}: met")
            return
        if time.monotonic() >= end:
            run.emit(f"wait_until {' '.join(args[1:])}: NOT met in {args[0]} s")
            return
        time.sleep(0.5)


def step_observe(run, args, text):
    what = args[0]
    run.emit(f"## {run.norm.text(' '.join(args))}")
    if what == "workloads":
        run.observe_workloads()
    elif what == "state":
        run.observe_state(args[1:])
    elif what == "podman":
        run.observe_podman()
    elif what == "logs":
        run.observe_logs(args[1:])
    elif what == "daemons":
        run.observe_daemons()
    elif what == "agents":
        run.observe_agents()
    else:
        raise ScenarioError(f"observe {what}?")


def step_note(run, args, text):
    run.emit(f"# {' '.join(args)}")


STEPS = {
    "server": step_server,
    "agent": step_agent,
    "ank": step_ank,
    "sh": step_sh,
    "sleep": step_sleep,
    "tls": step_tls,
    "wait_until": step_wait_until,
    "observe": step_observe,
    "note": step_note,
}


# ---------------------------------------------------------------- driver


def run_scenario(sc, bindir, keep, verbose):
    run = Run(sc, bindir, keep=keep, verbose=verbose)
    t0 = time.monotonic()
    try:
        out = run.execute()
        err = None
    except Exception as e:  # the transcript records a broken run
        out = run.out + [f"HARNESS ERROR: {e}"]
        err = str(e)
    finally:
        run.cleanup()
    return out, time.monotonic() - t0, err, run.work


def load_known_differences():
    """tests/twin/known-differences: `SCENARIO  reason` lines; with --check a
    listed scenario may differ from its golden (reported as `known`), and
    one that no longer differs fails as `FIXED` until it is taken out."""
    known = {}
    path = os.path.join(SCEN_DIR, "known-differences")
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                ln = ln.strip()
                if ln and not ln.startswith("#"):
                    name, _, why = ln.partition(" ")
                    known[name] = why.strip()
    return known


def golden_path(sc):
    return os.path.join(SCEN_DIR, sc.name + ".golden")


def header(sc):
    return [f"# twin golden of {sc.name}: recorded from the reference (tests/harness/twin.sh --record)"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", action="store_true", help="(re)write the goldens from REF_BIN_DIR")
    ap.add_argument("--check", action="store_true", help="compare OUR_BIN_DIR with the goldens only")
    ap.add_argument("--long", action="store_true", help="include the long scenarios")
    ap.add_argument("--only-long", action="store_true", help="only the long scenarios")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("TWIN_JOBS", "4")))
    ap.add_argument("--out", default=None, help="folder for transcripts and diffs")
    ap.add_argument("--keep", action="store_true", help="keep the run folders (daemon logs)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()

    all_sc = sorted(f[: -len(".twin")] for f in os.listdir(SCEN_DIR) if f.endswith(".twin"))
    scen = {n: parse_scenario(os.path.join(SCEN_DIR, n + ".twin")) for n in all_sc}

    if a.list:
        for n in all_sc:
            sc = scen[n]
            print(f"{n:40s} {'long ' if sc.long else 'short'} {' '.join(sc.description)[:100]}")
        return 0

    if a.check:
        if not a.args:
            ap.error("--check OUR_BIN_DIR [SCENARIO...]")
        ref, ours, names = None, a.args[0], a.args[1:]
    elif a.record:
        if not a.args:
            ap.error("--record REF_BIN_DIR [SCENARIO...]")
        ref, ours, names = a.args[0], None, a.args[1:]
    else:
        if len(a.args) < 2:
            ap.error("REF_BIN_DIR OUR_BIN_DIR [SCENARIO...]")
        ref, ours, names = a.args[0], a.args[1], a.args[2:]
    for d in (ref, ours):
        if d is None:
            continue
        for b in ("ank-server", "ank-agent", "ank"):
            if not os.access(os.path.join(d, b), os.X_OK):
                print(f"twin: missing {os.path.join(d, b)}", file=sys.stderr)
                return 2
    if shutil.which("podman") is None:
        print("twin: podman not found (tools/setup.sh)", file=sys.stderr)
        return 2

    if names:
        for n in names:
            if n not in scen:
                print(f"twin: no scenario {n} in {SCEN_DIR}", file=sys.stderr)
                return 2
        chosen = names
    elif a.only_long:
        chosen = [n for n in all_sc if scen[n].long]
    else:
        chosen = [n for n in all_sc if a.long or not scen[n].long]

    outdir = a.out or tempfile.mkdtemp(prefix="twin-out-")
    os.makedirs(outdir, exist_ok=True)

    jobs = []  # (scenario, kind, bindir)
    for n in chosen:
        if ref and not a.check:
            jobs.append((n, "ref", ref))
        if ours and not a.record:
            jobs.append((n, "ours", ours))
    # the longest first, so that parallel runs end together
    jobs.sort(key=lambda j: (not scen[j[0]].long, j[0]))

    results = {}
    lock = threading.Lock()
    t_all = time.monotonic()

    def work(job):
        n, kind, bindir = job
        out, took, err, wdir = run_scenario(scen[n], bindir, a.keep, a.verbose)
        with open(os.path.join(outdir, f"{n}.{kind}.txt"), "w") as f:
            f.write("\n".join(header(scen[n]) + out) + "\n")
        with lock:
            results[(n, kind)] = (out, took, err)
            print(f"twin: {n} [{kind}] ran in {took:.0f} s{' (kept ' + wdir + ')' if a.keep else ''}"
                  f"{' ERROR ' + err if err else ''}", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(work, jobs))

    known = load_known_differences()
    failed = 0
    print(f"{'scenario':40s} {'set':5s} {'result':8s} seconds")
    for n in chosen:
        sc = scen[n]
        if a.record:
            out, took, err = results[(n, "ref")]
            with open(golden_path(sc), "w") as f:
                f.write("\n".join(header(sc) + out) + "\n")
            print(f"{n:40s} {'long' if sc.long else 'short':5s} {'recorded' if not err else 'ERROR':8s} {took:.0f}")
            if err:
                failed += 1
            continue
        if a.check:
            gp = golden_path(sc)
            if not os.path.exists(gp):
                print(f"{n:40s} {'long' if sc.long else 'short':5s} NOGOLDEN")
                failed += 1
                continue
            with open(gp) as f:
                want = f.read().rstrip("\n").split("\n")
            ref_label = "golden"
        else:
            want = header(sc) + results[(n, "ref")][0]
            ref_label = "ref"
        out, took, err = results[(n, "ours")]
        have = header(sc) + out
        if want == have:
            res = "same"
            if a.check and n in known:
                # a listed difference that went away: the list must say so
                res = "FIXED"
                failed += 1
        else:
            res = "DIFFERS"
            if a.check and n in known:
                res = "known"
            else:
                failed += 1
            diff = list(difflib.unified_diff(want, have, ref_label, "ours", lineterm=""))
            with open(os.path.join(outdir, f"{n}.diff"), "w") as f:
                f.write("\n".join(diff) + "\n")
        print(f"{n:40s} {'long' if sc.long else 'short':5s} {res:8s} {took:.0f}")
    print(f"twin: {len(chosen)} scenarios, {failed} failed (known differences: "
          f"{sum(1 for n in chosen if n in known) if a.check else 0}), {time.monotonic() - t_all:.0f} s; "
          f"transcripts and diffs in {outdir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
