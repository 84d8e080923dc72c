#!/usr/bin/env python3
"""What probes cost the agent: its CPU time (utime+stime from /proc/<pid>/stat,
and with its reaped children, i.e. the `podman exec` processes) over a
window (60 s) with 20 workloads each probed every 2 s (10 `httpGet`
readiness probes, 10 `exec` liveness probes), against the same 20 workloads
without probes. Also the machine's busy CPU over the window (conmon, podman
exec sessions; noisy on a shared machine).

    python3 tools/bench/probe_cost.py --server target/debug/ank-server \\
        --agent target/debug/ank-agent --cli target/debug/ank [--window 60]

Only containers of its own agent (`probecost`) are touched.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ankbench  # noqa: E402
from ankbench import CLK_TCK, Cluster, log, proc_cpu_ticks, system_busy_ticks  # noqa: E402

HTTP_ARGS = '["sh", "-c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www"]'
EXEC_ARGS = '["sh", "-c", "trap \'exit 0\' TERM; mkdir -p /tmp; touch /tmp/alive; sleep 1000000 & wait"]'


def manifest(agent, image, probes, kinds="mixed", n=20):
    out = ["apiVersion: v1", "workloads:"]
    for i in range(n):
        http = {"mixed": i % 2 == 0, "http": True, "exec": False}[kinds]
        out += [f"  pc{i}:", "    runtime: podman", f"    agent: {agent}", "    restartPolicy: NEVER"]
        if probes and http:
            out += ["    readinessProbe:", "      httpGet: {port: 8080, path: /index.html}", "      periodSeconds: 2"]
        if probes and not http:
            out += ["    livenessProbe:", "      exec: {command: [cat, /tmp/alive]}", "      periodSeconds: 2"]
        out += ["    runtimeConfig: |", f"      image: {image}", f"      commandArgs: {HTTP_ARGS if http else EXEC_ARGS}"]
    return "\n".join(out) + "\n"


def ready_count(c):
    rc, out, _ = c.cli("get", "workloads", "-o", "wide")
    if rc != 0:
        return 0
    n = 0
    for line in out.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 5 and cols[0].startswith("pc") and cols[3] == "Running(Ok)" and cols[4] == "True":
            n += 1
    return n


def measure(a, probes):
    c = Cluster(a)
    c.start()
    try:
        time.sleep(2)
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=a.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(manifest(a.agent_name, a.image, probes, a.kinds))
        rc, out, _ = c.cli("--no-wait", "apply", path, timeout=120)
        if rc != 0:
            raise RuntimeError(f"apply failed: {out}")
        deadline = time.time() + 300
        while ready_count(c) < 20:
            if time.time() > deadline:
                raise TimeoutError("20 workloads not Ready within 300 s")
            time.sleep(1)
        time.sleep(a.settle)
        pid = c.agent.pid
        own0, all0 = proc_cpu_ticks(pid)
        sys0 = system_busy_ticks()
        t0 = time.time()
        time.sleep(a.window)
        own1, all1 = proc_cpu_ticks(pid)
        sys1 = system_busy_ticks()
        secs = time.time() - t0
        ms = lambda ticks: ticks * 1000.0 / CLK_TCK  # noqa: E731
        return {
            "agent_ms": ms(own1 - own0),
            "agent_children_ms": ms(all1 - all0),
            "system_ms": ms(sys1[0] - sys0[0]),
            "secs": secs,
        }
    finally:
        c.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    e = os.environ.get
    p.add_argument("--server", default=e("ANK_SERVER_BIN"))
    p.add_argument("--agent", default=e("ANK_AGENT_BIN"))
    p.add_argument("--cli", default=e("ANK_CLI_BIN"))
    p.add_argument("--window", type=float, default=60.0)
    p.add_argument("--kinds", choices=["mixed", "http", "exec"], default="mixed",
                   help="mixed: 10 httpGet + 10 exec probes; http or exec: 20 of one kind")
    p.add_argument("--only-probes", action="store_true", help="skip the run without probes")
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--port", type=int, default=25571)
    p.add_argument("--agent-name", default="probecost")
    p.add_argument("--image", default="localhost/busybox:latest")
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "probecost", "run"))
    p.add_argument("--server-cmd", default="{server} --insecure --address {addr}")
    p.add_argument("--agent-cmd", default="{agent} --insecure --name {name} --server-url {url} --run-folder {run_folder}")
    p.add_argument("--cli-cmd", default="{cli} --insecure --server-url {url}")
    a = p.parse_args()
    for k in ("server", "agent", "cli"):
        if not getattr(a, k):
            p.error(f"--{k} is required")
        setattr(a, k, os.path.abspath(getattr(a, k)))
    ankbench.OWN["agent"] = a.agent_name
    os.makedirs(a.workdir, exist_ok=True)
    results = {}
    runs = (("with probes", True),) if a.only_probes else (("without probes", False), ("with probes", True))
    for name, probes in runs:
        r = measure(a, probes)
        results[name] = r
        log(f"{name:15}: agent {r['agent_ms']:7.0f} ms, agent+children {r['agent_children_ms']:7.0f} ms,"
            f" machine {r['system_ms']:8.0f} ms CPU over {r['secs']:.0f} s")
    if a.only_probes:
        return
    base, probed = results["without probes"], results["with probes"]
    tries = 20 * a.window / 2
    log(f"probes cost: agent {probed['agent_ms'] - base['agent_ms']:.0f} ms,"
        f" agent+children {probed['agent_children_ms'] - base['agent_children_ms']:.0f} ms"
        f" ({(probed['agent_children_ms'] - base['agent_children_ms']) / tries:.1f} ms per try, {tries:.0f} tries),"
        f" machine {probed['system_ms'] - base['system_ms']:.0f} ms")


if __name__ == "__main__":
    main()
