#!/usr/bin/env python3
"""Where the time of one workload start goes: `ank apply` -> podman's create, init and start
events, for two builds alternately (e.g. Eclipse Ankaios and ours).

usage: tools/start-phases.py A_BIN_DIR B_BIN_DIR [ROUNDS]

Each round starts A's server and agent (insecure, agent `agent_A`), waits until `ank get
agents` lists the agent (polling every 50 ms, as ankbench does), applies one busybox workload,
reads podman's event log (file events backend, /run/libpod/events/events.log) and stops both;
then the same for B. Prints per build the median seconds from the apply's launch to each
event and to the apply's return, and the sorted start times. Needs podman with the `file`
events backend and localhost/busybox:latest; removes all podman containers between runs.
"""
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EVENTS_LOG = "/run/libpod/events/events.log"
ADDRESS = "127.0.0.1:25561"
MANIFEST = """apiVersion: v1
workloads:
  w00:
    runtime: podman
    agent: agent_A
    restartPolicy: NEVER
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sleep", "100000"]
"""


def podman_time(text):
    main, _, frac = text.rstrip("Z").partition(".")
    base = datetime.datetime.strptime(main[:19], "%Y-%m-%dT%H:%M:%S")
    return base.replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + (frac or "0"))


def one_start(bin_dir, work):
    subprocess.run("podman rm -af >/dev/null 2>&1", shell=True)
    run_folder = os.path.join(work, "run")
    shutil.rmtree(run_folder, ignore_errors=True)
    os.makedirs(run_folder)
    url = f"http://{ADDRESS}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen([f"{bin_dir}/ank-server", "--insecure", "--address", ADDRESS], **quiet)
    agent = subprocess.Popen([f"{bin_dir}/ank-agent", "--insecure", "--name", "agent_A",
                              "--server-url", url, "--run-folder", run_folder], **quiet)
    cli = [f"{bin_dir}/ank", "--insecure", "--server-url", url]
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run(cli + ["get", "agents"], capture_output=True, text=True)
            if r.returncode == 0 and "agent_A" in r.stdout:
                break
            time.sleep(0.05)
        else:
            raise TimeoutError(f"{bin_dir}: the agent was never listed")
        offset = os.path.getsize(EVENTS_LOG)
        manifest = os.path.join(work, "one.yaml")
        with open(manifest, "w") as f:
            f.write(MANIFEST)
        t0 = time.time()
        subprocess.run(cli + ["apply", manifest], capture_output=True)
        phases = {"apply_returned": time.time() - t0}
        time.sleep(0.5)
        with open(EVENTS_LOG) as f:
            f.seek(offset)
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("Type") == "container" and event.get("Name", "").startswith("w00."):
                    phases.setdefault(event["Status"], podman_time(event["Time"]) - t0)
        return phases
    finally:
        for p in (agent, server):
            p.terminate()
            p.wait()
        subprocess.run("podman rm -af >/dev/null 2>&1", shell=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    results = {b: [] for b in builds}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(rounds):
            for b in builds:
                results[b].append(one_start(b, work))
    for b in builds:
        runs = results[b]
        keys = ["create", "init", "start", "apply_returned"]
        medians = "  ".join(f"{k}={statistics.median(r[k] for r in runs if k in r):.3f}"
                            for k in keys if any(k in r for r in runs))
        print(f"{b}\n  {medians}\n  start: {sorted(round(r.get('start', float('nan')), 3) for r in runs)}")


if __name__ == "__main__":
    main()
