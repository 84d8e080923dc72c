#!/usr/bin/env python3
"""ecubench: the orchestrator on a node like an ECU, side by side with Eclipse Ankaios.

Runs the daemons, podman and the containers in one cgroup limited to a fraction of one core
and a memory size, with podman's storage on a throttled loop device (tools/bench/ecu/
envelope.py), and runs each scenario for the reference and for ours alternately, round by
round. Prints medians and the median of the per-round ratios ours/reference (below 1: we
are faster or smaller), the power-cut cycles with every deviation, and writes them as a
markdown table (--markdown) and all samples as JSON (--json).

Scenarios (--scenarios, comma-separated; default all but concurrency):
  cold_boot      server and agent start with a startup manifest of 20, 50 and 100 workloads
                 (every tenth depends on another) until all are Running(Ok)
  burst          apply of 20 and of 100 workloads at once, update of all, delete of all
  idle           100 running (applied 10 more at a time): CPU and PSS over --idle-seconds
  server_restart 100 running (applied 10 more at a time), the server restarted (ours with
                 --state-file; both with the startup manifest of the 100): time until every
                 state is reported again, and how many containers changed (must be 0)
  powercut       SIGKILL of everything in the envelope at a random moment (an apply in flight
                 in half of the cycles), then a boot; checks every cycle (ecu/powercut.py)
  concurrency    ours with --max-parallel-creates 1, 2, 4, 8 and unlimited, and the reference,
                 applying --concurrency-workloads workloads
  containerd     ours on the containerd runtime (the reference's needs nerdctl): cold boot and
                 burst, beside ours on podman

Needs root, cgroup v1 (cpu, cpuacct, memory, blkio, freezer), podman, losetup/mkfs.ext4 and
/var/tmp/ankaios-busybox.tar (tools/setup.sh writes it); containerd for `containerd`.
Example: python3 tools/bench/ecubench.py --ref REF_BIN --ours target/release --rounds 3
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ecu import envelope as envmod  # noqa: E402
from ecu import powercut, scenarios  # noqa: E402

ALL = "cold_boot,burst,idle,server_restart,powercut"


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", help="folder with the reference's ank-server, ank-agent, ank")
    p.add_argument("--ours", help="folder with our ank-server, ank-agent, ank")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scenarios", default=ALL)
    p.add_argument("--workloads", type=int, default=100, help="N of idle and server_restart")
    p.add_argument("--cold-boot-sizes", default="20,50,100")
    p.add_argument("--burst-sizes", default="20,100")
    p.add_argument("--batch", type=int, default=10,
                   help="idle and server_restart bring N up in applies of this many more")
    p.add_argument("--idle-seconds", type=int, default=30)
    p.add_argument("--powercut-cycles", type=int, default=30)
    p.add_argument("--ref-powercut-cycles", type=int, default=None,
                   help="cycles for the reference (default: --powercut-cycles)")
    p.add_argument("--powercut-workloads", type=int, default=20)
    p.add_argument("--concurrency", default="1,2,4,8,0", help="0 = unlimited")
    p.add_argument("--concurrency-workloads", type=int, default=40)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--timeout", type=float, default=300, help="per wait, seconds")
    p.add_argument("--cpu", type=float, default=0.5, help="cores of the envelope")
    p.add_argument("--memory", default="512M")
    p.add_argument("--flash-write", default="10M", help="bytes/s")
    p.add_argument("--flash-read", default="40M", help="bytes/s")
    p.add_argument("--flash-size", default="4G")
    p.add_argument("--no-envelope", action="store_true")
    p.add_argument("--envelope-name", default="ankbench-ecu")
    p.add_argument("--agent-name", default="ecu")
    p.add_argument("--image-tar", default="/var/tmp/ankaios-busybox.tar")
    p.add_argument("--workdir", default="/var/tmp/ankbench-ecu")
    p.add_argument("--keep", action="store_true", help="keep the daemons' logs and files")
    p.add_argument("--json")
    p.add_argument("--markdown")
    a = p.parse_args()
    if not a.ref and not a.ours:
        p.error("give --ref and/or --ours")
    if a.seed is None:
        a.seed = int(time.time())
    return a


class Results:
    def __init__(self):
        self.samples = {}  # metric -> impl -> [values per round]
        self.powercuts = {}

    def add(self, impl, metrics, rnd):
        for k, v in metrics.items():
            self.samples.setdefault(k, {}).setdefault(impl, {})[rnd] = v

    def table(self, impls):
        rows = []
        for k in self.samples:
            per = self.samples[k]
            med = {}
            for i in impls:
                vals = [v for v in per.get(i, {}).values() if v is not None]
                med[i] = statistics.median(vals) if vals else None
            ratios = []
            if "ref" in per and "ours" in per:
                for r, v in per["ours"].items():
                    rv = per["ref"].get(r)
                    if v is not None and rv:
                        ratios.append(v / rv)
            ratio = statistics.median(ratios) if ratios else None
            n = max(len(per.get(i, {})) for i in impls)
            fails = sum(1 for i in impls for v in per.get(i, {}).values() if v is None)
            rows.append((k, med, ratio, n, fails))
        return rows


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def report(res, impls, a, env, out=sys.stdout):
    lines = []
    head = "| metric | " + " | ".join({"ref": "Eclipse Ankaios", "ours": "ours",
                                         "ours_containerd": "ours on containerd"}.get(i, i)
                                        for i in impls)
    lines.append(head + " | ours/reference | rounds |")
    lines.append("|---" * (len(impls) + 3) + "|")
    for k, med, ratio, n, fails in res.table(impls):
        cells = " | ".join(fmt(med.get(i)) for i in impls)
        note = f" ({fails} timed out)" if fails else ""
        lines.append(f"| {k} | {cells} | {fmt(ratio)} | {n}{note} |")
    for impl, cycles in res.powercuts.items():
        ok = sum(1 for c in cycles if not c["deviations"])
        boots = [c["boot_s"] for c in cycles if c["boot_s"] is not None]
        worst = max(boots) if boots else None
        lines.append("")
        lines.append(f"Power cuts, {impl}: {ok} of {len(cycles)} cycles without deviation; "
                     f"in flight {sum(c['in_flight'] for c in cycles)}, acknowledged "
                     f"{sum(c['acknowledged'] for c in cycles)}; boot median "
                     f"{fmt(statistics.median(boots)) if boots else '-'} s, worst {fmt(worst)} s")
        for c in cycles:
            for d in c["deviations"]:
                lines.append(f"- cycle {c['cycle']}: {d}")
    env_line = ("no envelope" if a.no_envelope else
                f"envelope: {a.cpu} core, {a.memory} memory, flash writes {a.flash_write}/s "
                f"reads {a.flash_read}/s (loop device, cgroup v1 blkio)")
    lines.append("")
    lines.append(f"{env_line}; seed {a.seed}; {a.rounds} round(s), alternating.")
    text = "\n".join(lines)
    print(text, file=out, flush=True)
    return text


def main():
    a = parse()
    impls = [i for i, d in (("ref", a.ref), ("ours", a.ours)) if d]
    bins = {"ref": a.ref, "ours": a.ours}
    for i in impls:
        for b in ("ank-server", "ank-agent", "ank"):
            if not os.access(os.path.join(bins[i], b), os.X_OK):
                raise SystemExit(f"{bins[i]}/{b} is missing")
    env = envmod.Envelope(a.envelope_name, a.cpu, envmod.parse_size(a.memory),
                          envmod.parse_size(a.flash_write), envmod.parse_size(a.flash_read),
                          envmod.parse_size(a.flash_size), a.workdir,
                          enabled=not a.no_envelope)
    env.setup(a.image_tar)
    if "containerd" in a.scenarios.split(","):
        env.setup_containerd(a.image_tar)
    scratch = tempfile.mkdtemp(prefix="run-", dir=a.workdir)
    ctx = scenarios.Ctx(env, a, scratch)
    want = set(a.scenarios.split(","))
    res = Results()
    table_impls = list(impls)

    def save():
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"samples": res.samples, "powercuts": res.powercuts,
                           "args": vars(a)}, f, indent=1)

    def guarded(impl, rnd, label, fn):
        """One scenario; a failure of the tool (a podman call that hangs, say) is recorded
        and the run goes on."""
        try:
            res.add(impl, fn(), rnd)
        except Exception as e:  # noqa: BLE001 - any failure is reported, the run goes on
            print(f"  {impl} {label}: failed: {e!r}", flush=True)
            res.add(impl, {f"{label}_tool_failure": 1}, rnd)
        save()
    try:
        for rnd in range(a.rounds):
            for impl in impls:
                b = bins[impl]
                if "cold_boot" in want:
                    for n in (int(x) for x in a.cold_boot_sizes.split(",")):
                        guarded(impl, rnd, f"cold_boot_{n}",
                                lambda n=n: scenarios.cold_boot(ctx, impl, b, n))
                if "burst" in want:
                    for n in (int(x) for x in a.burst_sizes.split(",")):
                        guarded(impl, rnd, f"burst_{n}",
                                lambda n=n: scenarios.burst(ctx, impl, b, n, idle_s=0))
                if "idle" in want:
                    guarded(impl, rnd, "idle", lambda: scenarios.idle_scenario(
                        ctx, impl, b, a.workloads, a.idle_seconds, a.batch))
                if "server_restart" in want:
                    guarded(impl, rnd, "server_restart", lambda: scenarios.server_restart(
                        ctx, impl, b, a.workloads, a.batch))
                if "concurrency" in want:
                    guarded(impl, rnd, "concurrency", lambda: concurrency(ctx, impl, b, a))
                print(f"round {rnd + 1}/{a.rounds} {impl} done", file=sys.stderr, flush=True)
            if "containerd" in want and a.ours:
                if "ours_containerd" not in table_impls:
                    table_impls.append("ours_containerd")
                for n in (int(x) for x in a.cold_boot_sizes.split(",")):
                    guarded("ours_containerd", rnd, f"cold_boot_{n}", lambda n=n: scenarios.cold_boot(
                        ctx, "ours", a.ours, n, runtime="containerd"))
                for n in (int(x) for x in a.burst_sizes.split(",")):
                    guarded("ours_containerd", rnd, f"burst_{n}", lambda n=n: scenarios.burst(
                        ctx, "ours", a.ours, n, runtime="containerd", idle_s=0))
        if "powercut" in want:
            for impl in impls:
                cycles = a.powercut_cycles if impl == "ours" or a.ref_powercut_cycles is None \
                    else a.ref_powercut_cycles
                try:
                    res.powercuts[impl] = powercut.run(ctx, impl, bins[impl], cycles,
                                                       a.powercut_workloads, a.seed)
                except Exception as e:  # noqa: BLE001 - reported as the cycles' result
                    res.powercuts[impl] = [{"cycle": 0, "in_flight": False,
                                            "acknowledged": False, "boot_s": None,
                                            "deviations": [repr(e)]}]
                save()
    finally:
        env.teardown()
    text = report(res, table_impls, a, env)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    save()
    if a.keep:
        print(f"logs and files: {scratch}", file=sys.stderr)
    else:
        scenarios.clean_scratch(scratch)


def concurrency(ctx, impl, b, a):
    out = {}
    n = a.concurrency_workloads
    limits = [int(x) for x in a.concurrency.split(",")] if impl == "ours" else [None]
    for lim in limits:
        args = [] if lim is None else ["--max-parallel-creates", str(lim if lim else 1000)]
        tag = "creates_default" if lim is None else f"creates_{lim or 'unlimited'}"
        m = scenarios.burst(ctx, impl, b, n, idle_s=0, agent_args=args, tag=tag)
        out.update(m)
    return out


if __name__ == "__main__":
    main()
