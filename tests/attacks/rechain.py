#!/usr/bin/env python3
"""Rechain: removes records from a finished evidence log and recomputes every seq, prev and
hash, so that `sandbox-watch verify` finds one unbroken chain ending in `end`.

    rechain.py LOG [--drop TEXT]... [--drop-pid PID]... [--drop-net-of PID]... [--out PATH]

Drops every record whose JSON (compact, as written) contains one of the TEXTs (default: id_rsa
and .bashrc), every record about one of the PIDs, the network records of the --drop-net-of
PIDs, and every `violation` record; the end record's counts are made
to agree. Writes LOG in place (or PATH). Nothing anchors the chain today, so nothing shows it.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swlog  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--drop", action="append")
    ap.add_argument("--drop-pid", action="append", type=int, default=[])
    ap.add_argument("--drop-net-of", action="append", type=int, default=[])
    ap.add_argument("--out")
    a = ap.parse_args()
    needles = a.drop or ["id_rsa", ".bashrc"]
    records = swlog.read_log(a.log)
    forged = swlog.scrub(records, needles, a.drop_pid, a.drop_net_of)
    out = a.out or a.log
    if a.out:
        open(out, "w").close()
    swlog.write_log(out, forged)
    print(
        f"rechain: {len(records)} records -> {len(forged)}; head {forged[-1]['hash']}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
