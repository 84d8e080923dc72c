"""The ECU envelope: one cgroup (v1 `cpu`, `cpuacct`, `memory`, `blkio`, `freezer`)
holding the daemons, podman and the containers, limited to a fraction of one core and a
memory size, with podman's storage on a loop device whose reads and writes the cgroup may
only do at a set rate.

On cgroup v1 the `blkio` throttle applies to reads and to direct or synced writes
(podman's database commits, fsync'd layer writes); buffered writes are written back
outside the cgroup and are not throttled. `--no-envelope` runs the same scenarios
without any limit.

Containers join the envelope through podman's `--cgroup-parent` (the manifests carry it
as a `commandOptions` entry, the same for both implementations; conmon lands in
`<parent>/conmon`) or, for containerd, through a containerd namespace named like the
cgroup (our connector puts a task in `/<namespace>/<id>`).
"""
import os
import shutil
import signal
import subprocess
import time

CONTROLLERS = ("cpu", "cpuacct", "memory", "blkio", "freezer")
CGROOT = "/sys/fs/cgroup"


def parse_size(text):
    """`512M`, `10M`, `2G`, `4096` -> bytes."""
    text = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMG" else text
    return int(float(number) * mult)


class Envelope:
    """Owns the cgroup, the loop device and the podman configuration files."""

    def __init__(self, name, cpu, memory, flash_write, flash_read, flash_size, workdir,
                 enabled=True):
        self.name = name
        self.cpu = cpu
        self.memory = memory
        self.flash_write = flash_write
        self.flash_read = flash_read
        self.flash_size = flash_size
        self.workdir = workdir
        self.enabled = enabled
        self.loop = None
        self.mount = os.path.join(workdir, "flash")
        self.run_root = f"/run/{name}"
        self.conf_dir = os.path.join(workdir, "conf")

    # ------------------------------------------------------------ set-up
    def setup(self, image_tar):
        os.makedirs(self.workdir, exist_ok=True)
        os.makedirs(self.conf_dir, exist_ok=True)
        if self.enabled:
            self._cgroups()
            self._flash()
        else:
            os.makedirs(self.mount, exist_ok=True)
        self._podman_conf()
        # Locks of containers made before (or with shared-memory locks) start free.
        subprocess.run(["podman", "system", "renumber"], env=self.env(), capture_output=True,
                       timeout=120)
        self._load_image(image_tar)
        self._remove_leftovers()

    def _remove_leftovers(self):
        """Containers an interrupted run left in the envelope's storage (it is the tool's
        own): an agent would otherwise find their names taken."""
        for _ in range(3):
            ids = subprocess.run(["podman", "ps", "-aq"], env=self.env(), capture_output=True,
                                 text=True, timeout=120).stdout.split()
            if not ids:
                return
            subprocess.run(["podman", "rm", "-f", "-t", "0"] + ids, env=self.env(),
                           capture_output=True, timeout=600)

    def _cg(self, controller, *parts):
        return os.path.join(CGROOT, controller, self.name, *parts)

    def _write(self, controller, knob, value):
        with open(self._cg(controller, knob), "w") as f:
            f.write(str(value))

    def _cgroups(self):
        for c in CONTROLLERS:
            if not os.path.isdir(os.path.join(CGROOT, c)):
                raise SystemExit(f"envelope: cgroup v1 controller '{c}' is not mounted "
                                 f"under {CGROOT} (use --no-envelope)")
            os.makedirs(self._cg(c), exist_ok=True)
        period = 100000
        self._write("cpu", "cpu.cfs_period_us", period)
        self._write("cpu", "cpu.cfs_quota_us", int(period * self.cpu))
        # The envelope is a device of its own: builds beside it must not take
        # its fraction of a core away (its quota still caps it).
        self._write("cpu", "cpu.shares", 16384)
        self._write("memory", "memory.limit_in_bytes", self.memory)

    def _flash(self):
        os.makedirs(self.mount, exist_ok=True)
        image = os.path.join(self.workdir, "flash.img")
        if os.path.ismount(self.mount):
            src = subprocess.run(["findmnt", "-no", "SOURCE", self.mount],
                                 capture_output=True, text=True).stdout.strip()
            self.loop = src
        else:
            if not os.path.exists(image):
                with open(image, "wb") as f:
                    f.truncate(self.flash_size)
                subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
            self.loop = subprocess.run(["losetup", "-f", "--show", image], check=True,
                                       capture_output=True, text=True).stdout.strip()
            subprocess.run(["mount", self.loop, self.mount], check=True)
        st = os.stat(self.loop)
        dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        self._write("blkio", "blkio.throttle.write_bps_device", f"{dev} {self.flash_write}")
        self._write("blkio", "blkio.throttle.read_bps_device", f"{dev} {self.flash_read}")

    def _podman_conf(self):
        storage = os.path.join(self.conf_dir, "storage.conf")
        with open(storage, "w") as f:
            f.write('[storage]\ndriver = "overlay"\n'
                    f'graphroot = "{self.mount}/storage"\n'
                    f'runroot = "{self.run_root}/storage"\n')
        containers = os.path.join(self.conf_dir, "containers.conf")
        with open(containers, "w") as f:
            # File locks: a podman killed while holding one (the OOM killer, a power cut)
            # releases it with its death. podman's default shared-memory locks stay taken,
            # and every later call on that container hangs until `podman system renumber`
            # (seen with the reference's 100 parallel creates in 512 MiB); they are also
            # shared with the host's other podman storages.
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]\n'
                    '[engine]\nlock_type = "file"\nruntime = "runc"\n'
                    f'tmp_dir = "{self.run_root}/libpod"\n'
                    f'events_logfile_path = "{self.run_root}/libpod/events/events.log"\n')

    def _load_image(self, image_tar):
        have = subprocess.run(["podman", "image", "exists", "localhost/busybox:latest"],
                              env=self.env()).returncode == 0
        if not have:
            if not os.path.exists(image_tar):
                raise SystemExit(f"envelope: {image_tar} is missing (tools/setup.sh saves it)")
            subprocess.run(["podman", "load", "-q", "-i", image_tar], env=self.env(),
                           check=True, capture_output=True)

    def setup_containerd(self, image_tar):
        """The image in the containerd namespace named like the envelope."""
        check = subprocess.run(["ctr", "-n", self.name, "images", "check",
                                "name==localhost/busybox:latest"], capture_output=True, text=True)
        if "complete" not in check.stdout:
            subprocess.run(["ctr", "-n", self.name, "images", "import", image_tar], check=True,
                           capture_output=True)

    # ------------------------------------------------------------ use
    def env(self):
        """The environment of every podman call and daemon: the envelope's storage."""
        e = dict(os.environ)
        e["CONTAINERS_STORAGE_CONF"] = os.path.join(self.conf_dir, "storage.conf")
        e["CONTAINERS_CONF"] = os.path.join(self.conf_dir, "containers.conf")
        return e

    def cgroup_parent(self):
        return f"/{self.name}" if self.enabled else None

    def preexec(self):
        """Runs in a child before exec: moves it into the envelope."""
        if not self.enabled:
            return None
        paths = [self._cg(c, "cgroup.procs") for c in CONTROLLERS]

        def join():
            for p in paths:
                with open(p, "w") as f:
                    f.write(str(os.getpid()))
        return join

    def cpu_ns(self):
        """CPU time of everything in the envelope so far (cpuacct), or None."""
        if not self.enabled:
            return None
        with open(self._cg("cpuacct", "cpuacct.usage")) as f:
            return int(f.read())

    def memory_peak(self):
        if not self.enabled:
            return None
        with open(self._cg("memory", "memory.max_usage_in_bytes")) as f:
            return int(f.read())

    def reset_memory_peak(self):
        if self.enabled:
            self._write("memory", "memory.max_usage_in_bytes", 0)

    def oom_kills(self):
        if not self.enabled:
            return 0
        with open(self._cg("memory", "memory.oom_control")) as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        return 0

    def pids(self):
        """Every process in the envelope, its sub-cgroups included."""
        out = set()
        for root, _dirs, files in os.walk(self._cg("memory")):
            if "cgroup.procs" in files:
                with open(os.path.join(root, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
        return out

    def power_cut(self):
        """Every process in the envelope dies at once, as at a power loss: frozen first
        (nothing forks or reacts meanwhile), SIGKILLed, thawed."""
        if not self.enabled:
            raise SystemExit("power cut needs the envelope")
        roots = []
        for root, _dirs, _files in os.walk(self._cg("freezer")):
            roots.append(root)
        self._write("freezer", "freezer.state", "FROZEN")
        deadline = time.time() + 10
        while time.time() < deadline:
            with open(self._cg("freezer", "freezer.state")) as f:
                if f.read().strip() == "FROZEN":
                    break
            time.sleep(0.005)
        if os.environ.get("ECUBENCH_DEBUG"):
            print("  power cut: killing", sorted(self.pids()), flush=True)
        for _ in range(3):
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._write("freezer", "freezer.state", "THAWED")
        deadline = time.time() + 10
        while self.pids() and time.time() < deadline:
            time.sleep(0.01)
        if os.environ.get("ECUBENCH_DEBUG"):
            print("  power cut: left", self.pids(), flush=True)

    def teardown(self):
        if not self.enabled:
            return
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def drop_caches():
    """Cold page cache, as after a boot (needs root)."""
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass


def have(tool):
    return shutil.which(tool) is not None
