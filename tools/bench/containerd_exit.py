#!/usr/bin/env python3
"""How soon an exit code of a containerd workload reaches `ank`: the time
from containerd's `/tasks/exit` event (its timestamp, as `ctr events`
prints it) to the first `ank get workloads -o json` (polled every 10 ms)
that shows the workload Failed(ExecFailed).

    python3 tools/bench/containerd_exit.py --bin-dir target/release [-n 10]

Starts `ank-server` and `ank-agent` from BIN_DIR on a free port, the agent
with a containerd namespace of its own (`ank-bench-exit-<pid>`, busybox
imported from /var/tmp/ankaios-busybox.tar, made by `tools/setup.sh`), and
`ctr -n NS events` in the background. Applies N workloads
`sh -c 'sleep 1; exit 3'` one after another and prints each latency, then
the median, min and max. Removes the namespace at the end. Never restarts
containerd.
"""

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

IMAGE = "localhost/busybox:latest"
IMAGE_TAR = "/var/tmp/ankaios-busybox.tar"


def ctr(ns, *args, check=False):
    return subprocess.run(["ctr", "-n", ns, *args], capture_output=True, text=True, check=check)


def first_column(ns, what):
    if what == "tasks":
        lines = ctr(ns, "tasks", "ls").stdout.splitlines()[1:]
    else:
        lines = ctr(ns, what, "ls", "-q").stdout.splitlines()
    return [line.split()[0] for line in lines if line.strip()]


def remove_namespace(ns):
    for task in first_column(ns, "tasks"):
        ctr(ns, "tasks", "kill", "-a", "-s", "SIGKILL", task)
        for _ in range(50):
            if ctr(ns, "tasks", "rm", task).returncode == 0:
                break
            time.sleep(0.1)
    for what in ("containers", "images"):
        for item in first_column(ns, what):
            ctr(ns, what, "rm", item)
    for _ in range(5):  # layer snapshots: leaves first
        snaps = first_column(ns, "snapshots")
        if not snaps:
            break
        for s in snaps:
            ctr(ns, "snapshots", "rm", s)
    for blob in first_column(ns, "content"):
        ctr(ns, "content", "rm", blob)
    subprocess.run(["ctr", "namespaces", "rm", ns], capture_output=True)


def parse_event_time(line):
    """`2026-11-28 03:55:00.123456789 +0000 UTC ns /tasks/exit {...}` -> epoch seconds."""
    fields = line.split()
    day, clock, offset = fields[0], fields[1], fields[2]
    whole, _, frac = clock.partition(".")
    t = datetime.datetime.strptime(f"{day} {whole} {offset}", "%Y-%m-%d %H:%M:%S %z").timestamp()
    return t + (float("0." + frac) if frac else 0.0)


class ExitEvents:
    """`ctr -n NS events` in the background: container id -> time of its
    task's exit event."""

    def __init__(self, ns):
        self.ns = ns
        self.times = {}
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            ["ctr", "-n", ns, "events"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if "/tasks/exit" not in line:
                continue
            fields = line.split(None, 6)
            if len(fields) < 7 or fields[4] != self.ns:
                continue
            body = json.loads(fields[6])
            if body.get("id") != body.get("container_id"):
                continue  # an exec, not the task
            with self.lock:
                self.times.setdefault(body["container_id"], parse_event_time(line))

    def time_of(self, prefix, limit=5.0):
        end = time.time() + limit
        while time.time() < end:
            with self.lock:
                for cid, t in self.times.items():
                    if cid.startswith(prefix):
                        return t
            time.sleep(0.005)
        return None

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", required=True, help="folder with ank-server, ank-agent and ank")
    ap.add_argument("-n", type=int, default=10, help="workloads, one after another (default 10)")
    args = ap.parse_args()
    bins = {b: os.path.join(args.bin_dir, b) for b in ("ank-server", "ank-agent", "ank")}
    for b, path in bins.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: build it (cargo build --release --bins)")
    if subprocess.run(["ctr", "version"], capture_output=True).returncode != 0:
        sys.exit("containerd not reachable: run `bash tools/setup.sh`")
    if not os.path.exists(IMAGE_TAR):
        sys.exit(f"{IMAGE_TAR} missing: run `bash tools/setup.sh`")

    ns = f"ank-bench-exit-{os.getpid()}"
    agent = f"bench_exit_{os.getpid()}"
    url = f"http://127.0.0.1:{free_port()}"
    run = tempfile.TemporaryDirectory()
    procs = []
    events = None
    try:
        ctr(ns, "images", "import", IMAGE_TAR, check=True)
        events = ExitEvents(ns)
        procs.append(subprocess.Popen(
            [bins["ank-server"], "--insecure", "--address", url[len("http://"):], "--run-folder", run.name],
            stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [bins["ank-agent"], "--insecure", "--name", agent, "--server-url", url, "--run-folder", run.name,
             "--containerd-namespace", ns], stderr=subprocess.DEVNULL))
        ank = [bins["ank"], "--insecure", "--server-url", url]

        def rows():
            o = subprocess.run([*ank, "get", "workloads", "-o", "json"], capture_output=True, text=True)
            return json.loads(o.stdout) if o.returncode == 0 and o.stdout.strip() else []

        end = time.time() + 20
        while agent not in subprocess.run([*ank, "get", "agents"], capture_output=True, text=True).stdout:
            if time.time() > end:
                sys.exit("the agent did not connect within 20 s")
            time.sleep(0.1)

        latencies = []
        for i in range(args.n):
            name = f"exit{i}"
            manifest = (
                "apiVersion: v1\nworkloads:\n"
                f"  {name}:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: NEVER\n"
                f"    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: [\"--net=none\"]\n"
                "      commandArgs: [\"sh\", \"-c\", \"sleep 1; exit 3\"]\n"
            )
            subprocess.run([*ank, "apply", "-"], input=manifest, capture_output=True, text=True, check=True)
            end = time.time() + 60
            seen = None
            while seen is None:
                if time.time() > end:
                    sys.exit(f"{name} not Failed(ExecFailed) within 60 s")
                for r in rows():
                    st = r.get("executionState", {})
                    if r.get("name") == name and st.get("state") == "Failed" and st.get("subState") == "ExecFailed":
                        seen = time.time()
                if seen is None:
                    time.sleep(0.010)
            exited = events.time_of(f"{name}.")
            if exited is None:
                sys.exit(f"no /tasks/exit event for {name}")
            latencies.append((seen - exited) * 1000)
            print(f"{name}: {latencies[-1]:.1f} ms", flush=True)
        print(f"n={len(latencies)} median={statistics.median(latencies):.1f} ms "
              f"min={min(latencies):.1f} ms max={max(latencies):.1f} ms")
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
        if events:
            events.stop()
        remove_namespace(ns)
        run.cleanup()


if __name__ == "__main__":
    main()
