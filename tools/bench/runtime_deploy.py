#!/usr/bin/env python3
"""Deploy time on the containerd runtime against podman, same machine, same run.

Starts one ank-server and one ank-agent from BIN_DIR (own port, run folder and
containerd namespace), then for each round and each size (1 and 20 by default)
applies N busybox `sleep` workloads on podman and on containerd, alternately
(podman, containerd, podman, ...), and measures from `ank apply` to every
workload `Running(Ok)` (polling `ank get workloads -o json`). While a deploy
runs it samples the agent's process tree (processes whose parent is the
agent) every 5 ms and keeps the largest count. Between deploys all workloads
are deleted and the runtimes checked empty.

usage: runtime_deploy.py BIN_DIR [--rounds 5] [--sizes 1,20] [--net default|none]

Prints per (runtime, size) the median/min/max seconds and the median of the
per-round ratios containerd/podman, and the largest agent process tree seen.
Needs podman, containerd (tools/setup.sh) and localhost/busybox:latest.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

IMAGE = "localhost/busybox:latest"
TAR = "/var/tmp/ankaios-busybox.tar"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def children(pid):
    """pids whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


class Cluster:
    def __init__(self, bins, ns, agent):
        self.bins, self.ns, self.agent = bins, ns, agent
        self.dir = tempfile.mkdtemp(prefix="runtime-deploy-")
        self.url = f"http://127.0.0.1:{free_port()}"
        addr = self.url.removeprefix("http://")
        self.server = subprocess.Popen([f"{bins}/ank-server", "--insecure", "--address", addr],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        self.agent_proc = subprocess.Popen(
            [f"{bins}/ank-agent", "--insecure", "-n", agent, "--server-url", self.url,
             "--run-folder", os.path.join(self.dir, "run"), "--containerd-namespace", ns],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if agent in self.ank("get", "agents").stdout:
                return
            time.sleep(0.05)
        raise SystemExit("agent never listed")

    def ank(self, *args, stdin=None):
        return run([f"{self.bins}/ank", "--insecure", "--server-url", self.url, *args], input=stdin)

    def states(self):
        r = self.ank("get", "workloads", "-o", "json")
        try:
            rows = json.loads(r.stdout or "[]")
        except json.JSONDecodeError:
            return {}
        return {w["name"]: w["executionState"]["state"] + "(" + w["executionState"]["subState"] + ")"
                for w in rows}

    def stop(self):
        for p in (self.agent_proc, self.server):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def manifest(agent, runtime, n, net):
    opts = []
    if net == "none":
        opts = ["--net=none"] if runtime == "containerd" else ["--network=none"]
    wl = []
    for i in range(n):
        wl.append(f"  w{i:02d}:\n    runtime: {runtime}\n    agent: {agent}\n    restartPolicy: NEVER\n"
                  f"    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: {json.dumps(opts)}\n"
                  f"      commandArgs: [\"sleep\", \"100000\"]\n")
    return "apiVersion: v1\nworkloads:\n" + "".join(wl)


def deploy(c, runtime, n, net):
    names = {f"w{i:02d}" for i in range(n)}
    stop = threading.Event()
    most = [0]

    def sample():
        while not stop.is_set():
            most[0] = max(most[0], len(children(c.agent_proc.pid)))
            time.sleep(0.005)

    t = threading.Thread(target=sample)
    t.start()
    t0 = time.time()
    r = c.ank("apply", "--no-wait", "-", stdin=manifest(c.agent, runtime, n, net))
    if r.returncode != 0:
        raise SystemExit(f"apply failed: {r.stderr}")
    while True:
        s = c.states()
        if names <= set(s) and all(s[x] == "Running(Ok)" for x in names):
            break
        if time.time() - t0 > 180:
            raise SystemExit(f"not all running: {s}")
        time.sleep(0.02)
    elapsed = time.time() - t0
    stop.set()
    t.join()
    # Delete everything and wait until the runtimes are empty.
    r = c.ank("delete", "workload", *sorted(names))
    t1 = time.time()
    while c.states() or containers(c, runtime):
        if time.time() - t1 > 180:
            raise SystemExit("delete did not finish")
        time.sleep(0.1)
    return elapsed, most[0]


def containers(c, runtime):
    if runtime == "podman":
        r = run(["podman", "ps", "-aq", "--filter", f"label=agent={c.agent}"])
    else:
        r = run(["ctr", "-n", c.ns, "containers", "ls", "-q"])
    return [x for x in r.stdout.split() if x]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bins")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sizes", default="1,20")
    p.add_argument("--net", default="default", choices=["default", "none"])
    a = p.parse_args()
    ns = f"runtime-deploy-{os.getpid()}"
    agent = f"rtdeploy{os.getpid()}"
    if run(["ctr", "-n", ns, "images", "import", TAR]).returncode != 0:
        raise SystemExit(f"cannot import {TAR} into containerd: run tools/setup.sh")
    c = Cluster(os.path.abspath(a.bins), ns, agent)
    times, trees = {}, {}
    try:
        for rnd in range(a.rounds):
            for n in (int(x) for x in a.sizes.split(",")):
                for runtime in ("podman", "containerd"):
                    t, tree = deploy(c, runtime, n, a.net)
                    times.setdefault((runtime, n), []).append(t)
                    trees[(runtime, n)] = max(trees.get((runtime, n), 0), tree)
                    print(f"round {rnd + 1} {runtime:10s} n={n:3d} {t:.3f} s, agent children at most {tree}",
                          file=sys.stderr, flush=True)
    finally:
        c.stop()
        run(["ctr", "-n", ns, "images", "rm", IMAGE])
        for b in run(["ctr", "-n", ns, "content", "ls", "-q"]).stdout.split():
            run(["ctr", "-n", ns, "content", "rm", b])
        for s in run(["ctr", "-n", ns, "snapshots", "ls"]).stdout.splitlines()[1:]:
            run(["ctr", "-n", ns, "snapshots", "rm", s.split()[0]])
        run(["ctr", "namespaces", "rm", ns])
    print(f"network: {a.net}; {a.rounds} rounds; apply until all Running(Ok), seconds")
    print(f"{'runtime':10s} {'n':>3s} {'median':>8s} {'min':>8s} {'max':>8s} {'cd/podman':>9s} {'agent children':>14s}")
    for (runtime, n), v in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0] != "podman")):
        ratio = ""
        if runtime == "containerd":
            pods = times[("podman", n)]
            ratio = f"{statistics.median(x / y for x, y in zip(v, pods)):.2f}"
        print(f"{runtime:10s} {n:3d} {statistics.median(v):8.3f} {min(v):8.3f} {max(v):8.3f} {ratio:>9s} "
              f"{trees[(runtime, n)]:14d}")


if __name__ == "__main__":
    main()
