"""Pages out what a process has mapped (`process_madvise(MADV_PAGEOUT)`), as the kernel
would under memory pressure: its file-backed pages (code, libraries) leave memory, and
what it touches afterwards comes back. PSS sampled some time later is the process's
working set, independent of how much memory pressure it met before. Anonymous memory
stays without swap."""

import ctypes
import os

SYS_PROCESS_MADVISE = 440  # x86_64
MADV_PAGEOUT = 21
IOV_MAX = 1024


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _ranges(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5] if len(parts) > 5 else ""
            if path.startswith("[v"):  # [vvar], [vdso], [vsyscall]
                continue
            yield start, end - start


def page_out(pid):
    """Advises the kernel to page out every mapping of `pid`; returns the bytes advised,
    or raises OSError when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.pidfd_open(pid)
    advised = 0
    try:
        ranges = list(_ranges(pid))
        for i in range(0, len(ranges), IOV_MAX):
            chunk = ranges[i:i + IOV_MAX]
            vec = (_Iovec * len(chunk))(*[_Iovec(s, n) for s, n in chunk])
            r = libc.syscall(SYS_PROCESS_MADVISE, fd, vec, len(chunk), MADV_PAGEOUT, 0)
            if r < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"process_madvise({pid}): {os.strerror(err)}")
            advised += r
    finally:
        os.close(fd)
    return advised
