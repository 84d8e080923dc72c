#!/usr/bin/env python3
"""Soak test of the MQTT fleet tier on one machine (run as root).

A broker host and N vehicles, each in its own network namespace:

- `ankfb`: a bridge with 10.78.0.1/16 and Debian's mosquitto, started here, on
  8883 with TLS, client certificates required (the CN is the user) and an ACL:
  `fleet-operator` reads and writes `fleet/#` (and reads `$SYS/#`), a vehicle
  reads only `fleet/<itself>/desired` and writes only its own
  `status`, `events`, `info` and `online`. Persistence is on, so a restart keeps
  sessions and retained messages.
- `ankvNN` (NN = 01..N): a veth pair to the bridge (10.78.1.<i>/16), its own
  `ank-server -k` (127.0.0.1:25551 inside the namespace) whose startup manifest
  runs the connector workload (localhost/ank-fleet-connector:latest, built by
  tools/build-fleet-image.sh, `--network=host`, only this vehicle's key,
  certificate and the CA certificate mounted at /certs), and its own
  `ank-agent -k --name vNN`. v02 and v03 carry the label group=broken.

Programs enter a namespace with `nsenter --net=/var/run/netns/NAME`, which is
`ip netns exec NAME` without the remount of /sys that breaks podman's cgroups.

Phases: the negative (and positive) ACL checks with mosquitto_pub/mosquitto_sub;
(a) every vehicle's info and status visible to `ank-fleet status`; (b) rollout v1
to all in one wave; (c) a broken manifest (a workload named `bad.name`, which is
no valid name) to the `group=broken` vehicles with `--max-failures 0`, which
must halt (exit 1) and change nothing; (d) rollout v2
in waves 10%,50%,100% while a thread restarts the broker, cuts the links of three
vehicles for a while and kills one connector with SIGKILL. Then an idle window
measures the broker traffic, and the checks: every vehicle on v2 and Ready, no
duplicate apply (the vehicle's `ank get jobs` counts its apply jobs: startup
manifest + v1 + v2), no lost status (the fleet's view equals each vehicle's own
`ank get state`), the halted wave; last (e) a v3 that runs but never becomes
Ready (a readiness probe on a port nothing listens on, a gated update with
autoRevert) to the `group=broken` vehicles: each vehicle reverts it to v2 and
the wave halts on health. Each check prints a PASS or FAIL line; a
JSON summary follows. Exit code 0 only if every check passed.

Everything made here (namespaces, processes, the vehicles' containers, found by
their podman label agent=vNN) is removed at the end, also after a failure or
Ctrl-C, unless --keep; leftovers of an earlier run are removed at the start
(`--cleanup-only` does only that). A temporary work folder is removed after a
passing run and kept (its path printed, with the daemons' and, after a failure,
the connectors' logs in logs/) after a failing one.

`--infra-only` needs no ank-fleet binaries: network, broker, ACL checks and the
vehicles with a busybox stand-in for the connector, then clean-up.
`--no-broker-restart` leaves the broker alone during rollout v2 (debugging).

    python3 tests/harness/fleet-soak.py --vehicles 20
    python3 tests/harness/fleet-soak.py --vehicles 3 --quick      # the e2e suite's version
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BROKER_NS = "ankfb"
BRIDGE = "ankfbr0"
BROKER_IP = "10.78.0.1"
BROKER_PORT = 8883
BROKER_URL = f"mqtts://{BROKER_IP}:{BROKER_PORT}"
OPERATOR = "fleet-operator"
IMAGE = "localhost/ank-fleet-connector:latest"
APP_IMAGE = "localhost/busybox:latest"
CONNECTOR_WORKLOAD = "fleet-connector"
PREFIX = "fleet"
VEHICLE_NS_RE = re.compile(r"^ankv(\d{2,3})$")
VEHICLE_ID_RE = re.compile(r"^v\d{2,3}$")
WAVE_RE = re.compile(r"wave (\d+)/(\d+): (\d+) vehicles? ready in ([0-9.]+) ?s")
MOSQUITTO = "/usr/sbin/mosquitto"
BINARIES = ["ank-server", "ank-agent", "ank", "ank-certs", "ank-fleet", "ank-fleet-connector"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


class Abort(Exception):
    """A phase cannot go on; the remaining phases are skipped."""


class Done(Exception):
    """--infra-only: the remaining phases are skipped on purpose."""


def ns_cmd(ns: str, argv: list[str]) -> list[str]:
    return ["nsenter", f"--net=/var/run/netns/{ns}", *argv]


def clean_env() -> dict[str, str]:
    """The environment without ANK*/FLEET* settings of the caller."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANK", "FLEET"))}


def run(argv: list[str], *, check: bool = True, timeout: float = 60, input: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input,
                           env=env if env is not None else clean_env())
    except subprocess.TimeoutExpired as e:
        raise Abort(f"`{' '.join(argv)}` did not finish within {timeout} s") from e
    if check and p.returncode != 0:
        raise Abort(f"`{' '.join(argv)}` exited {p.returncode}: {(p.stderr or p.stdout).strip()[-2000:]}")
    return p


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["ip", *args], check=check, timeout=20)


def netns_list() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(ns: str) -> list[int]:
    out = run(["ip", "netns", "pids", ns], check=False).stdout
    return [int(x) for x in out.split() if x.isdigit()]


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def proc_stat(pid: int) -> dict | None:
    """RSS, peak RSS (KiB), CPU seconds (user+system) and age (s) of a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
    utime, stime, start = int(fields[11]), int(fields[12]), int(fields[19])

    def kib(key: str) -> int:
        m = re.search(rf"^{key}:\s+(\d+) kB", status, re.M)
        return int(m.group(1)) if m else 0

    return {"pid": pid, "rssKiB": kib("VmRSS"), "hwmKiB": kib("VmHWM"),
            "cpuS": (utime + stime) / CLK_TCK, "ageS": max(uptime - start / CLK_TCK, 1e-3)}


def podman_containers() -> list[dict]:
    p = run(["podman", "ps", "-a", "--format", "json"], check=False, timeout=60)
    try:
        return json.loads(p.stdout or "[]")
    except json.JSONDecodeError:
        return []


def remove_vehicle_containers(only: set[str] | None = None) -> int:
    """Removes the containers whose podman label agent= is a vehicle id
    (vNN), or one of `only`."""
    ids = []
    for c in podman_containers():
        agent = (c.get("Labels") or {}).get("agent", "")
        if (only is not None and agent in only) or (only is None and VEHICLE_ID_RE.match(agent)):
            ids.append(c["Id"])
    if ids:
        run(["podman", "rm", "-f", "-t", "0", *ids], check=False, timeout=180)
    return len(ids)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


class Subscriber:
    """A mosquitto_sub child whose output lines a thread collects."""

    def __init__(self, argv: list[str], name: str):
        self.name = name
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=clean_env(), start_new_session=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def text(self) -> list[str]:
        return [line for _, line in self.lines]

    def wait_for(self, pred, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(pred(line) for line in self.text()):
                return True
            if self.proc.poll() is not None:
                time.sleep(0.2)
                return any(pred(line) for line in self.text())
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            kill_pid(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_pid(self.proc.pid)
                self.proc.wait(timeout=5)
        self.thread.join(timeout=5)


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.n = args.vehicles
        width = max(2, len(str(self.n)))
        self.vehicles = [f"v{i:0{width}d}" for i in range(1, self.n + 1)]
        self.bin = Path(args.bin_dir).resolve()
        self.quick = args.quick
        self.cut_s = args.cut_seconds if args.cut_seconds is not None else (10 if args.quick else 60)
        self.idle_s = args.idle_seconds if args.idle_seconds is not None else (10 if args.quick else 60)
        self.broken = self.vehicles[1:3]  # two vehicles carry group=broken
        self.run_tag = time.strftime("%H%M%S")
        self.ids = {k: f"soak-{k}-{self.run_tag}" for k in ("v1", "broken", "v2", "sick")}
        self.checks: list[dict] = []
        self.timings: dict = {}
        self.idle: dict = {}
        self.resources: dict = {}
        self.events: list[str] = []
        self.servers: dict[str, subprocess.Popen] = {}
        self.agents: dict[str, subprocess.Popen] = {}
        self.broker: subprocess.Popen | None = None
        self.broker_lock = threading.Lock()
        self.subscribers: list[Subscriber] = []
        self.temp_workdir = args.workdir is None
        self.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fleet-soak-")).resolve()
        self.certs = self.workdir / "certs"
        self.logs = self.workdir / "logs"
        self.stop_chaos = threading.Event()
        self.chaos_thread: threading.Thread | None = None
        self.cut_links: list[str] = []
        self.killed: tuple[str, int] | None = None
        self.v2_ok = False

    # ------------------------------------------------------------ reporting
    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
        return ok

    def passed(self) -> bool:
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    # ------------------------------------------------------------ commands
    def fleet_env(self) -> dict[str, str]:
        env = clean_env()
        env.update({
            "ANK_FLEET_BROKER": BROKER_URL,
            "ANK_FLEET_CA": str(self.certs / "ca.pem"),
            "ANK_FLEET_CERT": str(self.certs / f"cli-{OPERATOR}.pem"),
            "ANK_FLEET_KEY": str(self.certs / f"cli-{OPERATOR}-key.pem"),
            "ANK_FLEET_SIGNING_KEY": str(self.certs / "fleet-signing-key.pem"),
        })
        return env

    def fleet(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(ns_cmd(BROKER_NS, [str(self.bin / "ank-fleet"), *args]), check=check, timeout=timeout,
                   env=self.fleet_env())

    def fleet_status(self) -> dict[str, dict]:
        p = self.fleet("status", "-o", "json", check=False, timeout=60)
        if p.returncode != 0:
            raise Abort(f"ank-fleet status exited {p.returncode}: {p.stderr.strip()[-1000:]}")
        data = json.loads(p.stdout or "[]")
        if isinstance(data, dict):
            data = [dict(v, vehicle=k) for k, v in data.items()]
        return {e.get("vehicle", ""): e for e in data}

    def ank(self, vehicle: str, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return run(ns_cmd(f"ank{vehicle}", [str(self.bin / "ank"), "-k", *args]), check=check, timeout=timeout)

    def vehicle_state(self, vehicle: str) -> dict:
        return json.loads(self.ank(vehicle, "get", "state", "-o", "json").stdout)

    def vehicle_jobs(self, vehicle: str) -> list[dict]:
        data = json.loads(self.ank(vehicle, "get", "jobs", "-o", "json").stdout or "[]")
        return list(data.values()) if isinstance(data, dict) else data

    def mqtt_args(self, user: str) -> list[str]:
        cert = f"cli-{user}" if user == OPERATOR else f"agent-{user}"
        return ["-h", BROKER_IP, "-p", str(BROKER_PORT), "-V", "mqttv5", "--cafile", str(self.certs / "ca.pem"),
                "--cert", str(self.certs / f"{cert}.pem"), "--key", str(self.certs / f"{cert}-key.pem")]

    def sub(self, user: str, topics: list[str], name: str, extra: list[str] | None = None) -> Subscriber:
        # Line-buffered: mosquitto_sub prints through stdio, block-buffered into a pipe.
        argv = ["stdbuf", "-oL", "-eL", "mosquitto_sub", *self.mqtt_args(user), "-d", "-v", *(extra or [])]
        for t in topics:
            argv += ["-t", t]
        s = Subscriber(ns_cmd(BROKER_NS, argv), name)
        self.subscribers.append(s)
        return s

    def pub(self, user: str, topic: str, payload: str) -> subprocess.CompletedProcess:
        return run(ns_cmd(BROKER_NS, ["mosquitto_pub", *self.mqtt_args(user), "-q", "1", "-t", topic, "-m", payload]),
                   check=False, timeout=20)

    def sys_value(self, topic: str) -> int | None:
        p = run(ns_cmd(BROKER_NS, ["mosquitto_sub", *self.mqtt_args(OPERATOR), "-C", "1", "-W", "5", "-t", topic]),
                check=False, timeout=15)
        try:
            return int(p.stdout.split()[0])
        except (IndexError, ValueError):
            return None

    # ------------------------------------------------------------ preflight and cleanup
    def preflight(self) -> None:
        if os.geteuid() != 0:
            raise Abort("run as root (network namespaces, podman)")
        needed = [b for b in BINARIES if not (self.args.infra_only and b.startswith("ank-fleet"))]
        missing = [b for b in needed if not (self.bin / b).is_file()]
        if missing:
            raise Abort(f"missing in {self.bin}: {', '.join(missing)}: build them with "
                        "`cargo build --release --bins` (ank-fleet*: `cargo build --release -p ank-fleet`)")
        tools = {"nsenter": "util-linux", "ip": "iproute2", "podman": "podman", "mosquitto_pub": "mosquitto-clients",
                 "mosquitto_sub": "mosquitto-clients"}
        absent = [f"{t} ({pkg})" for t, pkg in tools.items() if shutil.which(t) is None]
        if not Path(MOSQUITTO).is_file():
            absent.append(f"{MOSQUITTO} (mosquitto)")
        if absent:
            raise Abort(f"not installed: {', '.join(absent)}: run `bash tools/setup.sh`")
        if run(["podman", "image", "exists", APP_IMAGE], check=False).returncode != 0:
            raise Abort(f"image {APP_IMAGE} missing: run `bash tools/setup.sh`")
        if not 3 <= self.n <= 254:
            raise Abort("--vehicles must be between 3 and 254")

    @staticmethod
    def cleanup_leftovers(what: str = "leftovers of an earlier run") -> None:
        """Removes our namespaces with their processes, and the vehicles'
        containers: at the start what an earlier run left, at the end the rest."""
        found = [ns for ns in netns_list() if ns == BROKER_NS or VEHICLE_NS_RE.match(ns)]
        if found:
            log(f"cleanup: {what}: {' '.join(found)}")
        # Agents first, so nothing restarts the containers removed next.
        for ns in found:
            for pid in netns_pids(ns):
                if comm(pid) in ("ank-agent", "ank-server"):
                    kill_pid(pid)
        removed = remove_vehicle_containers()
        if removed:
            log(f"cleanup: removed {removed} vehicle containers")
        for ns in found:
            for pid in netns_pids(ns):
                kill_pid(pid)
        time.sleep(0.3 if found else 0)
        for ns in found:
            ip("netns", "del", ns, check=False)

    def teardown(self, failed: bool) -> None:
        self.stop_chaos.set()
        if self.chaos_thread is not None:
            self.chaos_thread.join(timeout=self.cut_s + 30)
        for s in self.subscribers:
            s.stop()
        if failed and self.agents:
            self.save_connector_logs()
        if self.args.keep:
            log(f"--keep: everything left running; work folder {self.workdir}; "
                "clean up with `python3 tests/harness/fleet-soak.py --cleanup-only`")
            return
        log("teardown: stopping agents, containers, servers, broker, namespaces")
        for p in self.agents.values():
            kill_pid(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.agents.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
                p.wait(timeout=5)
        remove_vehicle_containers(set(self.vehicles))
        for p in self.servers.values():
            kill_pid(p.pid, signal.SIGTERM)
        for p in self.servers.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
                p.wait(timeout=5)
        self.stop_broker()
        self.cleanup_leftovers("namespaces")
        if self.temp_workdir and not failed:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            log(f"work folder kept: {self.workdir} (logs in {self.logs})")

    def save_connector_logs(self) -> None:
        try:
            for c in podman_containers():
                labels = c.get("Labels") or {}
                if labels.get("agent") in self.vehicles and labels.get("name", "").startswith(CONNECTOR_WORKLOAD + "."):
                    p = run(["podman", "logs", c["Id"]], check=False, timeout=30)
                    name = f"{labels['agent']}-connector-{c['Id'][:12]}.log"
                    (self.logs / name).write_text(p.stdout + p.stderr)
        except (OSError, Abort) as e:
            log(f"could not save the connector logs: {e}")

    # ------------------------------------------------------------ setup
    def prepare(self) -> None:
        wd = self.workdir
        marker = wd / ".fleet-soak"
        if not self.temp_workdir and wd.exists() and any(wd.iterdir()):
            if not marker.exists():
                raise Abort(f"--workdir {wd} is not empty and not an earlier soak's folder")
            for child in wd.iterdir():
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        wd.mkdir(parents=True, exist_ok=True)
        marker.write_text("fleet-soak work folder\n")
        self.logs.mkdir()
        log(f"work folder {wd}")
        certs_bin = str(self.bin / "ank-certs")
        run([certs_bin, "-o", str(self.certs), "--server", "--server-san", f"{BROKER_IP},127.0.0.1"])
        run([certs_bin, "-o", str(self.certs), "--cli", OPERATOR])
        if not self.args.infra_only:
            # The operator's signing key; the connectors get its public half.
            run([str(self.bin / "ank-fleet"), "keygen", "--out", str(self.certs)])
        for v in self.vehicles:
            run([certs_bin, "-o", str(self.certs), "--agent", v])
            own = wd / v / "certs"
            own.mkdir(parents=True)
            signing = [] if self.args.infra_only else ["fleet-signing-pub.pem"]
            for f in ("ca.pem", f"agent-{v}.pem", f"agent-{v}-key.pem", *signing):
                shutil.copy2(self.certs / f, own / f)
        log(f"certificates: broker ({BROKER_IP}), {OPERATOR}, {self.n} vehicles")
        if not self.args.infra_only:
            p = run(["bash", str(REPO / "tools" / "build-fleet-image.sh"), str(self.bin / "ank-fleet-connector")],
                    timeout=300)
            log(p.stdout.strip())
        self.write_manifests()

    def write_manifests(self) -> None:
        for i, v in enumerate(self.vehicles, start=1):
            labels = ["model=soak", f"idx={i:02d}"] + (["group=broken"] if v in self.broken else [])
            args = ["--vehicle", v, "--broker", BROKER_URL, "--ca", "/certs/ca.pem", "--cert", f"/certs/agent-{v}.pem",
                    "--key", f"/certs/agent-{v}-key.pem", "--operator-key", "/certs/fleet-signing-pub.pem"]
            for label in labels:
                args += ["--label", label]
            args += ["--default-agent", v, *self.args.connector_arg]
            options = ["--network=host", "-v", f"{self.workdir / v / 'certs'}:/certs:ro"]
            image = IMAGE
            if self.args.infra_only:
                # A stand-in with the same options, mounts and access rules.
                image, args = APP_IMAGE, ["sh", "-c", "ls /certs /run/ankaios/control_interface && exec sleep 1000000"]
            (self.workdir / v / "manifest.yaml").write_text(
                "apiVersion: v1\n"
                "workloads:\n"
                f"  {CONNECTOR_WORKLOAD}:\n"
                "    runtime: podman\n"
                f"    agent: {v}\n"
                "    restartPolicy: ALWAYS\n"
                "    runtimeConfig: |\n"
                f"      image: {image}\n"
                f"      commandOptions: {json.dumps(options)}\n"
                f"      commandArgs: {json.dumps(args)}\n"
                "    controlInterfaceAccess:\n"
                "      allowRules:\n"
                "        - type: StateRule\n"
                "          operation: ReadWrite\n"
                '          filterMasks: ["desiredState.workloads", "desiredState.configs"]\n'
                "        - type: StateRule\n"
                "          operation: Read\n"
                '          filterMasks: ["workloadStates", "jobs"]\n'
                "      denyRules:\n"
                "        - type: StateRule\n"
                "          operation: Write\n"
                f'          filterMasks: ["desiredState.workloads.{CONNECTOR_WORKLOAD}"]\n')

        def app(version: str) -> str:
            # Exits at once on SIGTERM, so an update does not wait out podman's 10 s stop timeout.
            script = f"trap 'exit 0' TERM; echo app {version}; sleep 1000000 & wait"
            return ("apiVersion: v1\nworkloads:\n  app:\n    runtime: podman\n    restartPolicy: NEVER\n"
                    "    runtimeConfig: |\n"
                    f"      image: {APP_IMAGE}\n"
                    f"      commandArgs: {json.dumps(['sh', '-c', script])}\n")

        # Runs, but never becomes Ready (nothing listens on its probed port); its
        # gated update puts v2 back after 15 s, and the rollout halts on health.
        (self.workdir / "app-sick.yaml").write_text(
            app("sick") + "    readinessProbe:\n      tcpSocket: {port: 8099}\n      periodSeconds: 1\n"
            "      failureThreshold: 1\n"
            "    update: {healthyDeadline: 15s, minHealthyTime: 2s, autoRevert: true}\n")
        (self.workdir / "app-v1.yaml").write_text(app("v1"))
        (self.workdir / "app-v2.yaml").write_text(app("v2"))
        # Refused as a whole: `bad.name` is no valid workload name ([A-Za-z0-9_-]).
        # `app` changes too, so a partial apply would show.
        (self.workdir / "app-broken.yaml").write_text(
            app("broken") + "  bad.name:\n    runtime: podman\n    runtimeConfig: |\n"
            f"      image: {APP_IMAGE}\n      commandArgs: [\"true\"]\n")

    def net_up(self) -> None:
        ip("netns", "add", BROKER_NS)
        ip("-n", BROKER_NS, "link", "set", "lo", "up")
        ip("-n", BROKER_NS, "link", "add", BRIDGE, "type", "bridge")
        ip("-n", BROKER_NS, "addr", "add", f"{BROKER_IP}/16", "dev", BRIDGE)
        ip("-n", BROKER_NS, "link", "set", BRIDGE, "up")
        for i, v in enumerate(self.vehicles, start=1):
            ns = f"ank{v}"
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", BROKER_NS, "link", "add", self.link(v), "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("-n", BROKER_NS, "link", "set", self.link(v), "master", BRIDGE, "up")
            ip("-n", ns, "addr", "add", f"10.78.1.{i}/16", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
        log(f"network: {BROKER_NS} ({BROKER_IP}/16 on {BRIDGE}) and {self.n} vehicle namespaces "
            f"ank{self.vehicles[0]}..ank{self.vehicles[-1]}")

    @staticmethod
    def link(vehicle: str) -> str:
        """The bridge-side end of a vehicle's veth pair."""
        return f"fb-{vehicle}"

    # ------------------------------------------------------------ broker
    def write_broker_config(self) -> Path:
        b = self.workdir / "broker"
        b.mkdir(exist_ok=True)
        (b / "acl").write_text(
            f"user {OPERATOR}\n"
            f"topic readwrite {PREFIX}/#\n"
            "topic read $SYS/#\n\n"
            "# every client (the vehicles: user = certificate CN = vehicle id)\n"
            f"pattern read {PREFIX}/%u/desired\n"
            f"pattern write {PREFIX}/%u/status\n"
            f"pattern write {PREFIX}/%u/events\n"
            f"pattern write {PREFIX}/%u/info\n"
            f"pattern write {PREFIX}/%u/online\n")
        conf = b / "mosquitto.conf"
        conf.write_text(
            "user root\n"
            "per_listener_settings false\n"
            "persistence true\n"
            f"persistence_location {b}/\n"
            "autosave_interval 5\n"
            f"log_dest file {b}/mosquitto.log\n"
            # `all` logs every packet: the idle window counts the vehicles' packets in it.
            "log_type all\n"
            "connection_messages true\n"
            "log_timestamp_format %Y-%m-%dT%H:%M:%S\n"
            "sys_interval 1\n"
            "max_queued_messages 10000\n"
            f"listener {BROKER_PORT}\n"
            f"cafile {self.certs / 'ca.pem'}\n"
            f"certfile {self.certs / 'server.pem'}\n"
            f"keyfile {self.certs / 'server-key.pem'}\n"
            "require_certificate true\n"
            "use_identity_as_username true\n"
            f"acl_file {b / 'acl'}\n")
        return conf

    def start_broker(self) -> float:
        conf = self.workdir / "broker" / "mosquitto.conf"
        t = time.monotonic()
        with self.broker_lock:
            err = open(self.logs / "mosquitto.stderr", "a")
            self.broker = subprocess.Popen(ns_cmd(BROKER_NS, [MOSQUITTO, "-c", str(conf)]), stdout=err,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        while time.monotonic() - t < 20:
            if self.broker.poll() is not None:
                raise Abort(f"mosquitto exited {self.broker.returncode}: see {self.logs / 'mosquitto.stderr'} "
                            f"and {self.workdir / 'broker' / 'mosquitto.log'}")
            probe = run(ns_cmd(BROKER_NS, ["mosquitto_sub", *self.mqtt_args(OPERATOR), "-C", "1", "-W", "3", "-t",
                                           "$SYS/broker/version"]), check=False, timeout=10)
            if probe.stdout.strip():
                return time.monotonic() - t
            time.sleep(0.2)
        raise Abort("mosquitto does not answer the operator within 20 s")

    def stop_broker(self) -> None:
        with self.broker_lock:
            p, self.broker = self.broker, None
        if p is not None and p.poll() is None:
            kill_pid(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
                p.wait(timeout=5)

    # ------------------------------------------------------------ ACL
    def acl_test(self) -> None:
        v1, v2 = self.vehicles[0], self.vehicles[1]
        nonce = f"{os.getpid()}-{time.monotonic_ns()}"
        op = self.sub(OPERATOR, [f"{PREFIX}/#"], "operator")
        foreign = self.sub(v1, [f"{PREFIX}/{v2}/desired"], f"{v1}-on-{v2}-desired")
        own = self.sub(v1, [f"{PREFIX}/{v1}/desired"], f"{v1}-on-own-desired")
        subscribed = [s.wait_for(lambda line: line.startswith("Subscribed (mid:"), 10) for s in (op, foreign, own)]
        if not all(subscribed):
            raise Abort(f"ACL test: subscriptions not confirmed: {[s.text() for s in (op, foreign, own)]}")
        suback = next((line for line in foreign.text() if line.startswith("Subscribed (mid:")), "")

        cross = self.pub(v1, f"{PREFIX}/{v2}/status", f"cross-{nonce}")
        own_status = self.pub(v1, f"{PREFIX}/{v1}/status", f"own-{nonce}")
        own_desired = self.pub(v1, f"{PREFIX}/{v1}/desired", f"selfdesired-{nonce}")
        self.pub(OPERATOR, f"{PREFIX}/{v2}/desired", f"for{v2}-{nonce}")
        self.pub(OPERATOR, f"{PREFIX}/{v1}/desired", f"for{v1}-{nonce}")

        got_own = op.wait_for(lambda line: line == f"{PREFIX}/{v1}/status own-{nonce}", 5)
        got_own_desired = own.wait_for(lambda line: line == f"{PREFIX}/{v1}/desired for{v1}-{nonce}", 5)
        op.wait_for(lambda line: line == f"{PREFIX}/{v1}/desired for{v1}-{nonce}", 5)
        time.sleep(1.0)  # a late delivery of a refused message would show now
        op_lines, foreign_lines = op.text(), foreign.text()
        leaked_cross = any(f"cross-{nonce}" in line for line in op_lines)
        leaked_self_desired = any(f"selfdesired-{nonce}" in line for line in op_lines + own.text())
        leaked_read = any(f"for{v2}-{nonce}" in line for line in foreign_lines)
        for s in (op, foreign, own):
            s.stop()
        refused = "Not authorized" in (cross.stderr + cross.stdout)
        self.check("acl-positive-publish", got_own and own_status.returncode == 0,
                   f"{v1} publishing to {PREFIX}/{v1}/status: received by the operator: {got_own}")
        self.check("acl-positive-read", got_own_desired,
                   f"{v1} subscribed to {PREFIX}/{v1}/desired receives the operator's message: {got_own_desired}")
        self.check("acl-cross-publish-refused", not leaked_cross,
                   f"{v1} publishing to {PREFIX}/{v2}/status: operator received it: {leaked_cross}; "
                   f"broker answered: {'PUBACK Not authorized (0x87)' if refused else (cross.stderr.strip() or 'ok')}")
        self.check("acl-cross-read-refused", not leaked_read,
                   f"{v1} subscribed to {PREFIX}/{v2}/desired: received the operator's message for {v2}: "
                   f"{leaked_read} (SUBACK '{suback}'; mosquitto 2.0 grants the subscription and applies the read "
                   "ACL on delivery)")
        self.check("acl-own-desired-write-refused", not leaked_self_desired,
                   f"{v1} publishing to its own {PREFIX}/{v1}/desired: delivered: {leaked_self_desired}")

    # ------------------------------------------------------------ vehicles
    def start_vehicles(self) -> None:
        for v in self.vehicles:
            d = self.workdir / v
            (d / "server-run").mkdir()
            (d / "run").mkdir()
            self.servers[v] = subprocess.Popen(
                ns_cmd(f"ank{v}", [str(self.bin / "ank-server"), "-k", "--startup-manifest", str(d / "manifest.yaml"),
                                   "--run-folder", str(d / "server-run")]),
                stdout=subprocess.DEVNULL, stderr=open(self.logs / f"{v}-server.log", "w"), env=clean_env(),
                start_new_session=True)
        for v in self.vehicles:
            d = self.workdir / v
            self.agents[v] = subprocess.Popen(
                ns_cmd(f"ank{v}", [str(self.bin / "ank-agent"), "-k", "--name", v, "--run-folder", str(d / "run")]),
                stdout=subprocess.DEVNULL, stderr=open(self.logs / f"{v}-agent.log", "w"), env=clean_env(),
                start_new_session=True)
        t = time.monotonic()
        waiting = list(self.vehicles)
        while waiting and time.monotonic() - t < 30:
            self.check_daemons()
            waiting = [v for v in waiting if run([str(self.bin / "ank-server"), "--check", "--run-folder",
                                                  str(self.workdir / v / "server-run")], check=False).returncode != 0]
            time.sleep(0.2 if waiting else 0)
        if waiting:
            raise Abort(f"ank-server of {' '.join(waiting)} not serving after 30 s (logs in {self.logs})")
        log(f"vehicles: {self.n} ank-server (serving after {time.monotonic() - t:.1f} s) + ank-agent started")

    def connector_pids(self) -> dict[str, int]:
        """Vehicle id -> pid of its running connector, from /proc."""
        found: dict[str, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if not argv or not argv[0].endswith(b"ank-fleet-connector"):
                continue
            args = [a.decode(errors="replace") for a in argv]
            if "--vehicle" in args:
                i = args.index("--vehicle")
                if i + 1 < len(args) and args[i + 1] in self.vehicles:
                    found[args[i + 1]] = int(entry.name)
        return found

    def check_daemons(self) -> None:
        dead = [f"{v} {kind} exited {p.returncode}" for kind, procs in (("ank-server", self.servers),
                                                                         ("ank-agent", self.agents))
                for v, p in procs.items() if p.poll() is not None]
        if dead:
            raise Abort("vehicle daemons died: " + "; ".join(dead) + f" (logs in {self.logs})")

    # ------------------------------------------------------------ phases
    def phase_infra(self) -> None:
        """--infra-only: every vehicle's stand-in connector runs, in its namespace."""
        t = time.monotonic()
        while True:
            self.check_daemons()
            states = {v: self.exec_states(self.vehicle_state(v)).get(CONNECTOR_WORKLOAD) for v in self.vehicles}
            bad = {v: s for v, s in states.items() if not s or s[1:] != ("Running", "Ok")}
            if not bad or time.monotonic() - t > 60 + 5 * self.n:
                break
            time.sleep(1)
        self.check("infra-vehicles", not bad,
                   f"{self.n - len(bad)}/{self.n} stand-in connectors Running(Ok) after {time.monotonic() - t:.1f} s"
                   + (f"; not: {bad}" if bad else ""))
        jobs = {v: len(self.vehicle_jobs(v)) for v in self.vehicles}
        self.check("infra-jobs", set(jobs.values()) == {1}, f"apply jobs per vehicle (startup manifest): {jobs}")

    def phase_visible(self) -> None:
        limit = 90 + 6 * self.n
        t = time.monotonic()
        last_report = 0.0
        missing: list[str] = self.vehicles
        while time.monotonic() - t < limit:
            self.check_daemons()
            try:
                view = self.fleet_status()
            except (Abort, json.JSONDecodeError) as e:
                view = {}
                last_error = str(e)
            else:
                last_error = ""
            missing = [v for v in self.vehicles
                       if not (view.get(v, {}).get("labels", {}).get("model") == "soak"
                               and view[v].get("online") and view[v].get("lastSeen"))]
            if not missing:
                took = time.monotonic() - t
                self.timings["allVisibleS"] = round(took, 1)
                self.check("vehicles-visible", True,
                           f"{self.n} vehicles online with info and status in ank-fleet status after {took:.1f} s")
                return
            if time.monotonic() - last_report > 10:
                last_report = time.monotonic()
                log(f"visible {self.n - len(missing)}/{self.n}" + (f" ({last_error})" if last_error else ""))
            time.sleep(1)
        self.check("vehicles-visible", False, f"not visible within {limit} s: {' '.join(missing)}")
        raise Abort("not every vehicle became visible")

    def rollout(self, label: str, manifest: str, rollout_id: str, extra: list[str],
                timeout: float) -> tuple[int, list[str], float]:
        """Runs `ank-fleet rollout`, echoing its output; returns exit code, lines, seconds."""
        argv = ns_cmd(BROKER_NS, [str(self.bin / "ank-fleet"), "rollout", "-f", str(self.workdir / manifest),
                                  "--id", rollout_id, *extra])
        log(f"rollout {label}: ank-fleet rollout -f {manifest} --id {rollout_id} {' '.join(extra)}")
        t = time.monotonic()
        lines: list[str] = []
        logf = open(self.logs / f"rollout-{label}.log", "w")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.fleet_env(),
                             start_new_session=True)

        def pump(stream, tag):
            for line in stream:
                line = line.rstrip("\n")
                logf.write(f"{tag} {line}\n")
                logf.flush()
                if tag == "out":
                    lines.append(line)
                print(f"    {label} {'|' if tag == 'out' else '!'} {line}", flush=True)

        threads = [threading.Thread(target=pump, args=(p.stdout, "out"), daemon=True),
                   threading.Thread(target=pump, args=(p.stderr, "err"), daemon=True)]
        for th in threads:
            th.start()
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_pid(p.pid)
            p.wait(timeout=5)
            rc = -1
            log(f"rollout {label}: killed after {timeout} s")
        for th in threads:
            th.join(timeout=5)
        logf.close()
        return rc, lines, time.monotonic() - t

    def app_version(self, state: dict) -> str | None:
        wl = (state.get("desiredState") or {}).get("workloads", {}).get("app")
        if not wl:
            return None
        m = re.search(r"echo app (\w+)", wl.get("runtimeConfig", ""))
        return m.group(1) if m else "?"

    @staticmethod
    def exec_states(state: dict) -> dict[str, tuple[str, str, str]]:
        """Workload -> (agent, state, subState) from a vehicle's workloadStates;
        several instances of one workload are joined."""
        out: dict[str, list[tuple[str, str, str]]] = {}
        for agent, wls in (state.get("workloadStates") or {}).items():
            for name, instances in (wls or {}).items():
                for es in (instances or {}).values():
                    out.setdefault(name, []).append((agent, es.get("state", ""), es.get("subState", "")))
        return {k: v[0] if len(v) == 1 else (v[0][0], "+".join(s for _, s, _ in v), "+".join(s for _, _, s in v))
                for k, v in out.items()}

    @staticmethod
    def ledger(state: dict) -> dict:
        item = ((state.get("desiredState") or {}).get("configs") or {}).get("fleet-rollout")
        if isinstance(item, dict):
            return item
        if isinstance(item, str):
            return {"current": item, "applied": [item]}
        return {}

    def vehicle_on(self, v: str, version: str) -> tuple[bool, str]:
        st = self.vehicle_state(v)
        ver = self.app_version(st)
        es = self.exec_states(st).get("app")
        ok = ver == version and es is not None and es[1:] == ("Running", "Ok")
        return ok, f"{v}: app {ver} {es[1] + '(' + es[2] + ')' if es else 'no state'}"

    def wait_vehicles_on(self, vehicles: list[str], version: str, limit: float) -> tuple[bool, list[str]]:
        t = time.monotonic()
        while True:
            results = [self.vehicle_on(v, version) for v in vehicles]
            bad = [d for ok, d in results if not ok]
            if not bad or time.monotonic() - t > limit:
                return not bad, bad
            time.sleep(1)

    def phase_v1(self) -> None:
        rc, lines, took = self.rollout("v1", "app-v1.yaml", self.ids["v1"],
                                       ["--selector", "model=soak", "--waves", "100%", "--wave-timeout", "3m"],
                                       timeout=240)
        self.timings["v1"] = {"overallS": round(took, 1), "waves": self.wave_times(lines)}
        ok, bad = self.wait_vehicles_on(self.vehicles, "v1", 30 if rc == 0 else 5)
        self.check("rollout-v1", rc == 0 and ok,
                   f"exit {rc} after {took:.1f} s; " + ("every vehicle runs app v1" if ok else f"not on v1: {bad}"))
        if not (rc == 0 and ok):
            raise Abort("rollout v1 failed")

    def phase_broken(self) -> None:
        jobs_before = {v: len(self.vehicle_jobs(v)) for v in self.vehicles}
        rc, lines, took = self.rollout("broken", "app-broken.yaml", self.ids["broken"],
                                       ["--selector", "group=broken", "--max-failures", "0", "--wave-timeout", "60s"],
                                       timeout=120)
        self.timings["broken"] = {"overallS": round(took, 1)}
        st = self.fleet("rollout", "status", self.ids["broken"], "-o", "json", check=False)
        phase, reason = "?", ""
        try:
            record = json.loads(st.stdout)
            record = record.get("record", record)  # {"record": {...}, "vehicles": {...}}
            phase, reason = record.get("phase", "?"), record.get("reason", "")
        except json.JSONDecodeError:
            reason = (st.stderr or st.stdout).strip()[-300:]
        still, bad = self.wait_vehicles_on(self.broken, "v1", 5)
        jobs_after = {v: len(self.vehicle_jobs(v)) for v in self.vehicles}
        applied_nothing = jobs_after == jobs_before
        ledger_clean = all(self.ids["broken"] not in self.ledger(self.vehicle_state(v)).get("applied", [])
                           for v in self.vehicles)
        view = self.fleet_status()
        results = {v: view.get(v, {}).get("rejectedRollout") for v in self.broken}
        ready = all(view.get(v, {}).get("ready") for v in self.broken)
        ok = rc == 1 and phase == "Halted" and still and applied_nothing and ledger_clean and ready
        self.check("halted-wave", ok,
                   f"exit {rc} (want 1), rollout phase {phase} (want Halted; reason: {reason or '-'}); "
                   f"{' '.join(self.broken)} still on v1 and Running: {still}{'' if still else ' ' + str(bad)}; "
                   f"Ready in the fleet view: {ready}; results {results}; no job added on any vehicle: "
                   f"{applied_nothing}; ledger without {self.ids['broken']}: {ledger_clean}")

    def phase_sick(self) -> None:
        """A v3 that runs but never becomes Ready, to the group=broken vehicles:
        each vehicle's update gate reverts it to v2, and the wave halts on health."""
        rc, lines, took = self.rollout("sick", "app-sick.yaml", self.ids["sick"],
                                       ["--selector", "group=broken", "--max-failures", "0", "--wave-timeout", "90s"],
                                       timeout=150)
        self.timings["sick"] = {"overallS": round(took, 1)}
        st = self.fleet("rollout", "status", self.ids["sick"], "-o", "json", check=False)
        phase, reason, failed = "?", "", {}
        try:
            record = json.loads(st.stdout)
            record = record.get("record", record)
            phase, reason, failed = record.get("phase", "?"), record.get("reason", ""), record.get("failed", {})
        except json.JSONDecodeError:
            reason = (st.stderr or st.stdout).strip()[-300:]
        back, bad = self.wait_vehicles_on(self.broken, "v2", 30)
        # The wave halts at the first vehicle counted failed; each failure must be the revert.
        on_health = bool(failed) and all("reverted" in why for why in failed.values())
        ok = rc == 1 and phase == "Halted" and back and on_health
        self.check("unhealthy-wave-halted", ok,
                   f"exit {rc} (want 1) after {took:.1f} s, rollout phase {phase} (want Halted; reason: "
                   f"{reason or '-'}); failed on health (reverted): {on_health} {failed}; "
                   f"{' '.join(self.broken)} back on v2 and Running: {back}{'' if back else ' ' + str(bad)}")

    def wave_times(self, lines: list[str]) -> list[dict]:
        waves = []
        for line in lines:
            m = WAVE_RE.search(line)
            if m:
                waves.append({"wave": int(m.group(1)), "of": int(m.group(2)), "vehicles": int(m.group(3)),
                              "seconds": float(m.group(4))})
        return waves

    def rollout_plan(self, rollout_id: str) -> list[list[str]]:
        p = run(ns_cmd(BROKER_NS, ["mosquitto_sub", *self.mqtt_args(OPERATOR), "-C", "1", "-W", "10", "-t",
                                   f"{PREFIX}/rollouts/{rollout_id}"]), check=False, timeout=20)
        try:
            return json.loads(p.stdout)["waves"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return []

    def chaos(self, rollout_id: str, t0: float) -> None:
        def at(seconds: float) -> bool:
            """Sleeps until t0 + seconds; False when stopped."""
            return not self.stop_chaos.wait(max(0.0, t0 + seconds - time.monotonic()))

        def note(msg: str) -> None:
            self.events.append(f"+{time.monotonic() - t0:.1f}s {msg}")
            log(f"chaos: {msg}")

        try:
            self.chaos_steps(rollout_id, at, note)
        except Exception as e:  # noqa: BLE001 - the rollout's own checks show the effect
            note(f"error: {type(e).__name__}: {e}")
        finally:
            for v in self.cut_links:
                ip("-n", BROKER_NS, "link", "set", self.link(v), "up", check=False)
            if self.cut_links:
                note(f"links of {' '.join(self.cut_links)} up again")
            self.cut_links = []

    def chaos_steps(self, rollout_id: str, at, note) -> None:
        plan = self.rollout_plan(rollout_id)
        order = [v for wave in plan for v in wave] or list(self.vehicles)
        note(f"wave plan {[len(w) for w in plan]}: {plan}")
        victim = order[0]
        cut = [v for v in reversed(order) if v != victim][:3] if self.n > 3 else order[-3:]
        if not at(0.5):
            return
        pid = self.connector_pids().get(victim)
        if pid:
            kill_pid(pid)
            note(f"kill -9 connector of {victim} (pid {pid})")
            self.killed = (victim, pid)
        else:
            note(f"connector of {victim} not found, nothing killed")
        if not at(2):
            return
        for v in cut:
            ip("-n", BROKER_NS, "link", "set", self.link(v), "down", check=False)
            self.cut_links.append(v)
        note(f"links of {' '.join(cut)} down for {self.cut_s} s")
        if not at(4):
            return
        if self.args.no_broker_restart:
            note("broker restart skipped (--no-broker-restart)")
            at(2 + self.cut_s)
            return
        self.stop_broker()
        note("broker stopped (SIGTERM)")
        took = self.start_broker()
        note(f"broker started again, answering after {took:.1f} s")
        at(2 + self.cut_s)

    def phase_v2(self) -> None:
        # Long enough for the cut vehicles to come back and reconnect (backoff up to 30 s).
        wave_timeout = self.cut_s + (40 if self.quick else 180)
        t0 = time.monotonic()
        self.chaos_thread = threading.Thread(target=self.chaos, args=(self.ids["v2"], t0), daemon=True)
        self.chaos_thread.start()
        rc, lines, took = self.rollout("v2", "app-v2.yaml", self.ids["v2"],
                                       ["--selector", "model=soak", "--waves", "10%,50%,100%",
                                        "--wave-timeout", f"{wave_timeout:g}s"],
                                       timeout=3 * wave_timeout + 60)
        self.chaos_thread.join(timeout=self.cut_s + 30)
        self.chaos_thread = None
        waves = self.wave_times(lines)
        self.timings["v2"] = {"overallS": round(took, 1), "waves": waves, "chaos": self.events}
        for w in waves:
            log(f"v2 wave {w['wave']}/{w['of']}: {w['vehicles']} vehicles ready in {w['seconds']} s")
        log(f"v2 overall: {took:.1f} s")
        self.v2_ok = rc == 0 and len(waves) == 3
        self.check("rollout-v2", self.v2_ok,
                   f"exit {rc} after {took:.1f} s under disruption ({'; '.join(e.split(' ', 1)[1] for e in self.events[1:])}); "
                   f"waves {[w['seconds'] for w in waves]} s")
        if self.killed:
            victim, old = self.killed
            deadline = time.monotonic() + 60
            new = None
            while time.monotonic() < deadline:
                new = self.connector_pids().get(victim)
                if new and new != old:
                    break
                time.sleep(1)
            self.check("connector-restarted", bool(new and new != old),
                       f"{victim}'s connector killed (pid {old}), running again as pid {new}")

    def measure_idle(self) -> None:
        """Broker traffic and connector CPU while nothing happens."""
        s = self.sub(OPERATOR, [f"{PREFIX}/+/status", f"{PREFIX}/+/events", f"{PREFIX}/+/info",
                                f"{PREFIX}/+/online"], "idle", ["-R"])
        s.wait_for(lambda line: line.startswith("Subscribed (mid:"), 10)
        broker_log = self.workdir / "broker" / "mosquitto.log"
        before = self.sys_value("$SYS/broker/messages/received")
        offset = broker_log.stat().st_size
        cpu0 = {v: proc_stat(pid) for v, pid in self.connector_pids().items()}
        log(f"idle: counting the broker's messages for {self.idle_s} s")
        time.sleep(self.idle_s)
        with open(broker_log, "rb") as f:
            f.seek(offset)
            window = f.read().decode(errors="replace")
        after = self.sys_value("$SYS/broker/messages/received")
        cpu1 = {v: proc_stat(pid) for v, pid in self.connector_pids().items()}
        s.stop()
        publishes = [line for line in s.text() if line.startswith(f"{PREFIX}/")]
        by_kind: dict[str, int] = {}
        for line in publishes:
            kind = line.split(" ", 1)[0].split("/")[-1]
            by_kind[kind] = by_kind.get(kind, 0) + 1
        # Every packet the broker received from a vehicle (client id = vehicle id), by type.
        packets: dict[str, int] = {}
        for m in re.finditer(r"Received (\w+) from (\S+)", window):
            if m.group(2) in self.vehicles:
                packets[m.group(1)] = packets.get(m.group(1), 0) + 1
        vehicle_packets = sum(packets.values())
        minutes = self.idle_s / 60
        all_packets = (after - before) if before is not None and after is not None else None
        idle_cpu = [(cpu1[v]["cpuS"] - cpu0[v]["cpuS"]) / self.idle_s * 100 for v in cpu1
                    if cpu0.get(v) and cpu1.get(v) and cpu0[v]["pid"] == cpu1[v]["pid"]]
        self.idle = {
            "windowS": self.idle_s,
            "vehiclePublishes": len(publishes),
            "vehiclePublishesByTopic": by_kind,
            "publishesPerVehiclePerMin": round(len(publishes) / self.n / minutes, 2),
            "vehiclePacketsByType": packets,
            "vehiclePacketsPerVehiclePerMin": round(vehicle_packets / self.n / minutes, 2),
            "brokerPacketsReceivedAllClients": all_packets,
            "connectorIdleCpuPercentMedian": round(median(idle_cpu), 3),
            "connectorIdleCpuPercentMax": round(max(idle_cpu), 3) if idle_cpu else 0.0,
        }
        log(f"idle {self.idle_s} s: {len(publishes)} publishes from vehicles {by_kind} = "
            f"{self.idle['publishesPerVehiclePerMin']} per vehicle per minute; the broker received "
            f"{vehicle_packets} MQTT packets from the vehicles {packets} = "
            f"{self.idle['vehiclePacketsPerVehiclePerMin']} per vehicle per minute ({all_packets} from all clients "
            f"with this tool's probes, $SYS/broker/messages/received); connector CPU "
            f"median {self.idle['connectorIdleCpuPercentMedian']} %")

    def final_checks(self) -> None:
        # Every vehicle on v2 and Ready (its own view and the fleet's).
        # After a failed rollout some vehicles never get v2: no long wait then.
        ok, bad = self.wait_vehicles_on(self.vehicles, "v2", 60 if self.v2_ok else 5)
        view = self.fleet_status()
        not_ready = [v for v in self.vehicles if not (view.get(v, {}).get("ready") and view[v].get("online"))]
        self.check("all-on-v2-ready", ok and not not_ready,
                   f"{self.n - len(bad)}/{self.n} vehicles run app v2 Running(Ok)"
                   + (f"; not: {bad}" if bad else "")
                   + (f"; not Ready or offline in the fleet view: {not_ready}" if not_ready else "; all Ready, online"))

        # No duplicate applies: startup manifest + v1 + v2, one job each.
        expected = 3
        counts, wrong = {}, {}
        for v in self.vehicles:
            jobs = self.vehicle_jobs(v)
            counts[v] = len(jobs)
            if len(jobs) != expected:
                wrong[v] = [(j.get("id"), j.get("phase"), sorted((j.get("workloads") or {}).keys())) for j in jobs]
            ledger = self.ledger(self.vehicle_state(v))
            applied = ledger.get("applied", [])
            if applied != [self.ids["v1"], self.ids["v2"]]:
                wrong.setdefault(v, []).append(f"ledger applied {applied}")
        dup = sum(max(0, c - expected) for c in counts.values())
        self.check("no-duplicate-apply", not wrong,
                   f"apply jobs per vehicle {sorted(set(counts.values()))} (want {expected}: startup, v1, v2); "
                   f"duplicates {dup}" + (f"; wrong: {wrong}" if wrong else "; ledgers hold v1, v2 once"))

        # No lost status: the fleet's view equals every vehicle's own state.
        t = time.monotonic()
        while True:
            diffs = self.compare_views()
            if not diffs or time.monotonic() - t > (30 if self.v2_ok else 10):
                break
            time.sleep(1)
        self.check("no-lost-status", not diffs,
                   f"fleet view equals each vehicle's `ank get state` (rollout id, workload states) for "
                   f"{self.n - len(diffs)}/{self.n}" + (f"; differences: {diffs}" if diffs else ""))

    def compare_views(self) -> dict[str, str]:
        view = self.fleet_status()
        diffs = {}
        for v in self.vehicles:
            st = self.vehicle_state(v)
            mine = {k: e for k, e in self.exec_states(st).items() if k != CONNECTOR_WORKLOAD}
            fleet = view.get(v, {})
            theirs = {k: (w.get("agent", ""), w.get("state", ""), w.get("subState", ""))
                      for k, w in (fleet.get("workloads") or {}).items()}
            rid, frid = self.ledger(st).get("current"), fleet.get("rolloutId")
            if rid != frid or mine != theirs:
                diffs[v] = f"vehicle rollout {rid} workloads {mine}; fleet rollout {frid} workloads {theirs}"
        return diffs

    def measure_resources(self) -> None:
        con = {v: proc_stat(pid) for v, pid in self.connector_pids().items()}
        con = {v: s for v, s in con.items() if s}
        srv = [s for s in (proc_stat(p.pid) for p in self.servers.values()) if s]
        agt = [s for s in (proc_stat(p.pid) for p in self.agents.values()) if s]
        # nsenter execs mosquitto: the child's pid is the broker's.
        brk = proc_stat(self.broker.pid) if self.broker else None
        mib = lambda kib: round(kib / 1024, 1)  # noqa: E731
        rss = [s["rssKiB"] for s in con.values()]
        cpu = [s["cpuS"] for s in con.values()]
        pct = [s["cpuS"] / s["ageS"] * 100 for s in con.values()]
        self.resources = {
            "connectors": len(con),
            "connectorRssMiBMedian": mib(median(rss)), "connectorRssMiBMax": mib(max(rss, default=0)),
            "connectorPeakRssMiBMax": mib(max((s["hwmKiB"] for s in con.values()), default=0)),
            "connectorCpuSMedian": round(median(cpu), 3), "connectorCpuSTotal": round(sum(cpu), 3),
            "connectorCpuPercentOfLifetimeMedian": round(median(pct), 3),
            "connectorLifetimeSMedian": round(median([s["ageS"] for s in con.values()]), 1),
            "brokerRssMiB": mib(brk["rssKiB"]) if brk else None,
            "brokerCpuS": round(brk["cpuS"], 3) if brk else None,
            "serverRssMiBMedian": mib(median([s["rssKiB"] for s in srv])),
            "agentRssMiBMedian": mib(median([s["rssKiB"] for s in agt])),
        }
        r = self.resources
        log(f"resources at {self.n} vehicles: connector RSS median {r['connectorRssMiBMedian']} MiB "
            f"(max {r['connectorRssMiBMax']}, peak {r['connectorPeakRssMiBMax']}), connector CPU median "
            f"{r['connectorCpuSMedian']} s over {r['connectorLifetimeSMedian']} s "
            f"({r['connectorCpuPercentOfLifetimeMedian']} %), all connectors {r['connectorCpuSTotal']} s; "
            f"broker RSS {r['brokerRssMiB']} MiB, CPU {r['brokerCpuS']} s (since its last start); "
            f"ank-server RSS median {r['serverRssMiBMedian']} MiB, ank-agent {r['agentRssMiBMedian']} MiB")

    # ------------------------------------------------------------ main
    def main(self) -> int:
        failed = True
        try:
            self.preflight()
            self.cleanup_leftovers()
            self.prepare()
            self.net_up()
            self.write_broker_config()
            took = self.start_broker()
            log(f"broker: mosquitto on {BROKER_URL} in {BROKER_NS}, answering after {took:.1f} s")
            self.acl_test()
            self.start_vehicles()
            if self.args.infra_only:
                self.phase_infra()
                raise Done()
            self.phase_visible()
            self.phase_v1()
            self.phase_broken()
            self.phase_v2()
            self.measure_idle()
            self.final_checks()
            self.measure_resources()
            self.phase_sick()
            failed = not self.passed()
        except Done:
            failed = not self.passed()
        except Abort as e:
            self.check("run", False, str(e))
        except KeyboardInterrupt:
            self.check("run", False, "interrupted")
        except Exception as e:  # noqa: BLE001 - reported as a failed check, then cleaned up
            import traceback
            traceback.print_exc()
            self.check("run", False, f"{type(e).__name__}: {e}")
        finally:
            try:
                self.teardown(failed)
            except Exception as e:  # noqa: BLE001
                log(f"teardown: {type(e).__name__}: {e}")
        self.report()
        return 0 if self.passed() else 1

    def report(self) -> None:
        v2 = self.timings.get("v2", {})
        summary = {
            "vehicles": self.n, "quick": self.quick, "cutSeconds": self.cut_s, "idleSeconds": self.idle_s,
            "passed": self.passed(), "checks": self.checks, "timings": self.timings, "idle": self.idle,
            "resources": self.resources,
        }
        if not self.temp_workdir or not self.passed() or self.args.keep:
            (self.workdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if v2 and self.idle and self.resources:
            r, i = self.resources, self.idle
            print(f"scale: vehicles={self.n} v2 waves {[w['seconds'] for w in v2.get('waves', [])]} s, overall "
                  f"{v2.get('overallS')} s; idle {i['publishesPerVehiclePerMin']} publishes and "
                  f"{i['vehiclePacketsPerVehiclePerMin']} packets per vehicle per minute; connector RSS median "
                  f"{r['connectorRssMiBMedian']} MiB, CPU median {r['connectorCpuSMedian']} s; broker RSS "
                  f"{r['brokerRssMiB']} MiB", flush=True)
        print("summary: " + json.dumps(summary, indent=2), flush=True)
        passed = sum(c["ok"] for c in self.checks)
        print(f"{'PASSED' if self.passed() else 'FAILED'}: {passed}/{len(self.checks)} checks", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vehicles", type=int, default=20, help="number of vehicles (3..254; default 20)")
    ap.add_argument("--quick", action="store_true",
                    help="short link cut and idle window (10 s each), for the 3-vehicle suite version")
    ap.add_argument("--cut-seconds", type=float, help="how long three vehicles' links are cut (default 60, quick 10)")
    ap.add_argument("--idle-seconds", type=float, help="idle measurement window (default 60, quick 10)")
    ap.add_argument("--bin-dir", default=str(REPO / "target" / "release"),
                    help="folder of the built binaries (default target/release)")
    ap.add_argument("--workdir", help="scratch folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="leave everything running at the end, for debugging")
    ap.add_argument("--cleanup-only", action="store_true", help="remove the leftovers of an earlier run and exit")
    ap.add_argument("--infra-only", action="store_true",
                    help="test only the infrastructure (network, broker, ACL, vehicles with a busybox stand-in "
                         "connector, clean-up); needs no ank-fleet binaries")
    ap.add_argument("--no-broker-restart", action="store_true",
                    help="debugging: leave the broker running during rollout v2 (the other disruptions stay)")
    ap.add_argument("--connector-arg", action="append", default=[],
                    help="extra argument for every connector (repeatable), e.g. --connector-arg=--heartbeat=1m")
    args = ap.parse_args()

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    if args.cleanup_only:
        if os.geteuid() != 0:
            print("fleet-soak: run as root", file=sys.stderr)
            return 2
        Soak.cleanup_leftovers()
        log("cleanup done")
        return 0
    return Soak(args).main()


if __name__ == "__main__":
    sys.exit(main())
