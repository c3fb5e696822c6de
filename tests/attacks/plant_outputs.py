#!/usr/bin/env python3
"""Make root write through the agent's planting: at the monitor's --report, --summary and
--ocsf paths (read from its command line) the agent puts a symbolic link to VICTIM, or a FIFO,
then exits. The monitor writes those outputs when the capture ends (the report and summary) or
has had the file open since its start (OCSF).

    plant_outputs.py symlink VICTIM      # report.json -> VICTIM, summary.md -> VICTIM
    plant_outputs.py fifo                # a FIFO at each path: the monitor's open waits

For the OCSF path, which the monitor opened before the agent started, the agent can only
replace the name; the monitor keeps writing to the file it opened.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swlog  # noqa: E402


def plant(path, mode, victim):
    try:
        os.unlink(path)
        swlog.say(f"removed {path}")
    except FileNotFoundError:
        pass
    if mode == "symlink":
        os.symlink(victim, path)
        swlog.say(f"planted {path} -> {victim}")
    else:
        os.mkfifo(path, 0o666)
        swlog.say(f"planted a FIFO at {path}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "symlink"
    victim = sys.argv[2] if len(sys.argv) > 2 else None
    if mode not in ("symlink", "fifo") or (mode == "symlink" and not victim):
        raise SystemExit(__doc__)
    monitor = swlog.monitor_pid()
    for option in ("--report", "--summary", "--ocsf"):
        path = swlog.monitor_option(monitor, option)
        if path:
            plant(path, mode, victim)


if __name__ == "__main__":
    main()
