"""Power cuts: everything in the envelope (server, agent, podman, conmon, containers) is
SIGKILLed at once at a random moment, in half of the cycles while an `ank apply` is in
flight, then server and agent boot again. After each boot: every workload of the server's
desired state runs exactly once with a live process, the last acknowledged apply is in
that state, no orphan container, no duplicate, no ghost (reported Running(Ok) without a
live process), and the server came up (ours: its --state-file loaded).

The reference has no state file: it boots from the startup manifest every time, so an
acknowledged apply is lost, which is reported as a deviation."""
import os
import random
import threading
import time

from . import manifests
from .scenarios import all_running, finish
from .system import alive

RESTART = "ALWAYS"


def _expected(s, names):
    """(ok, deviations) for the current state of `s` against desired `names`."""
    dev = []
    states = s.states()
    if states is None:
        return False, ["the server does not answer"]
    conts = s.containers()
    if os.environ.get("ECUBENCH_DEBUG"):
        print("  check:", sorted(names), states, conts, flush=True)
    by_wl = {}
    for cid, cname, running, pid in conts:
        wl = cname.split(".")[0]
        by_wl.setdefault(wl, []).append((cid, running, pid))
    for n in sorted(names):
        entries = states.get(n) or []
        reported = [(st, sub) for _i, st, sub in entries]
        cs = by_wl.get(n, [])
        live = [c for c in cs if c[1] and alive(c[2], c[0])]
        if ("Running", "Ok") in reported and not live:
            dev.append(f"ghost: {n} reported Running(Ok), no live process")
        elif reported != [("Running", "Ok")]:
            dev.append(f"{n}: reported {reported}")
        if len(cs) > 1:
            dev.append(f"duplicate: {n} has {len(cs)} containers")
        if len(live) != 1 and ("Running", "Ok") in reported and cs:
            pass
    for wl, cs in by_wl.items():
        if wl not in names:
            dev.append(f"orphan: container(s) of {wl} ({len(cs)}), not in the desired state")
    return not dev, dev


def _boot(s, ctx, boot_manifest):
    s.start_server(boot_manifest)
    s.start_agent()


def run(ctx, name, bins, cycles, n, seed, runtime="podman", boot_timeout=90, settle=15):
    rng = random.Random(f"{seed}-{name}")
    s = ctx.system(name, bins, runtime, state_file=(name != "ref"))
    base = ctx.manifest(s, n, restart=RESTART)
    s.start_server(base)
    s.start_agent()
    names = set(manifests.names(n))
    first, why = wait_ok(s, names, ctx.args.timeout, with_devs=True)
    if first is None:
        finish(s)
        raise RuntimeError(f"{name}: the first boot did not converge: {why}")
    results = []
    desired = set(names)
    extra = {}
    for c in range(cycles):
        in_flight = c % 2 == 0
        change = {f"x{c % 3}": c + 1}
        acked = {}
        if in_flight:
            new_extra = dict(extra, **change)
            m = ctx.manifest(s, n, gen=0, restart=RESTART, extra=sorted(new_extra.items()))

            def do_apply(m=m):
                r = s.apply(m, timeout=120)
                acked["rc"] = r.returncode

            th = threading.Thread(target=do_apply, daemon=True)
            th.start()
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            time.sleep(rng.uniform(0.0, 2.0))
        ctx.env.power_cut()
        s.reap()
        if in_flight:
            th.join(timeout=30)
        acknowledged = in_flight and acked.get("rc") == 0
        t0 = time.monotonic()
        s.start_server(base)
        s.start_agent()
        dev = []
        boot = None
        if not wait(lambda: s.states() is not None, 60):
            dev.append("the server did not answer after the boot (state file not loaded?)")
        else:
            now = s.desired_names() or set()
            if acknowledged:
                missing = [k for k in change if k not in now]
                if missing:
                    dev.append(f"acknowledged apply lost: {missing} not in the desired state")
                else:
                    extra.update(change)
            elif in_flight and all(k in now for k in change):
                extra.update(change)
            desired = now
            ok_at, devs = wait_ok(s, desired, boot_timeout, settle, with_devs=True)
            if ok_at is None:
                dev += devs
            else:
                boot = time.monotonic() - t0
        results.append({"cycle": c + 1, "in_flight": in_flight, "acknowledged": acknowledged,
                        "boot_s": boot, "deviations": dev})
        print(f"  {name} power cut {c + 1}/{cycles}: in flight {in_flight}, acked "
              f"{acknowledged}, boot {boot if boot is None else round(boot, 2)} s, "
              f"{len(dev)} deviation(s) {dev[:3]}", flush=True)
        if dev:
            # Start the next cycle from a clean node, so that cycles stay independent.
            finish(s)
            extra = {}
            s.start_server(base) if name == "ref" else None
            if name != "ref":
                import os
                if s.state_file and os.path.exists(s.state_file):
                    os.remove(s.state_file)
                s.start_server(base)
            s.start_agent()
            wait_ok(s, set(manifests.names(n)), ctx.args.timeout)
    finish(s)
    return results


def wait(pred, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.1)
    return False


def wait_ok(s, names, timeout, settle=15, with_devs=False):
    """Waits until the node matches `names`; gives up early when the state side has
    converged but the deviations stay the same for `settle` seconds (a ghost never
    heals by itself)."""
    t0 = time.monotonic()
    last, since = None, None
    devs = []
    while time.monotonic() - t0 < timeout:
        states = s.states()
        if all_running(states, names):
            ok, devs = _expected(s, names)
            if ok:
                return (time.monotonic() - t0, []) if with_devs else True
            key = tuple(devs)
            if key != last:
                last, since = key, time.monotonic()
            elif time.monotonic() - since > settle:
                break
        else:
            devs = [f"not converged: {sorted((k, v) for k, v in (states or {}).items() if k in names and [(e[1], e[2]) for e in v] != [('Running', 'Ok')])[:5]}"]
        time.sleep(0.2)
    if not devs or devs[0].startswith("not converged"):
        _ok, more = _expected(s, names)
        devs = devs + more
    return (None, devs) if with_devs else False
