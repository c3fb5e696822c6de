#!/usr/bin/env python3
"""Prints what a sandbox-watch report says about the paths an attack touched.

summarize.py REPORT EXIT [SUBSTRING...]: the exit status, the violations, and every file
entry whose path or new_path contains one of the substrings (all entries when none given),
one line each: op, path [-> new_path], then the flags that are set (credential, persistence,
link, result, count, flags). Ends with the probe's gaps count.
"""
import json
import sys

report = json.load(open(sys.argv[1]))
code = sys.argv[2]
subs = sys.argv[3:]
print(f"  exit status: {code}")
violations = report.get("violations", [])
if not violations:
    print("  violations: none")
for v in violations:
    what = {k: v[k] for k in v if k not in ("kind", "at", "pid")}
    print(f"  violation: {v['kind']}: {json.dumps(what, ensure_ascii=False)[:240]}")
shown = 0
for f in report.get("files", []):
    paths = [f.get("path", ""), f.get("new_path") or "", f.get("link_to") or ""]
    if subs and not any(s in p for s in subs for p in paths):
        continue
    shown += 1
    line = f"  file: {f['op']} {f['path']}"
    if f.get("new_path"):
        line += f" -> {f['new_path']}"
    extra = []
    for key in ("credential", "persistence"):
        if f.get(key):
            extra.append(key)
    for key in ("link", "link_to", "result", "flags", "folded"):
        if f.get(key):
            extra.append(f"{key}={f[key]}")
    if f.get("count", 1) != 1:
        extra.append(f"count={f['count']}")
    if f.get("ino"):
        extra.append(f"ino={f['ino']}")
    print(line + ("  [" + ", ".join(extra) + "]" if extra else ""))
if shown == 0:
    print("  file entries on these paths: none")
print(f"  (probe: file_open={report['probe'].get('file_open')}, {len(report['probe'].get('gaps', []))} gaps; "
      f"{len(report.get('files', []))} file entries in all; events={report['coverage'].get('events')} lost={report['coverage'].get('lost')})")
