#!/bin/sh
# A thread flips rename's new-name buffer between ~/.bashrc and a decoy while the call runs.
. "$(dirname "$0")/lib.sh"
case_title "10 300 renames over ~/.bashrc while a thread flips the new-name buffer to a decoy" \
    "each real rename over .bashrc recorded as such (kernel's name), the race flagged as tamper"
sw_run -- "$B/attack_rename_race" "$H/.bashrc" "$H/.decoyx" 300
python3 - "$D/r.json" "$H" "$RC" "$D/l.jsonl" "$D/out.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); h = sys.argv[2]
# Rename by rename: the kernel's truth (the program's stat by inode) against the log's record.
truth = [l.split()[2] for l in open(sys.argv[5]) if l.startswith("truth ")]
logged = [json.loads(l) for l in open(sys.argv[4])]
recs = [j for j in logged if j.get("kind") in ("file", "file_failed") and j.get("op") == "rename" and j.get("path") == h + "/.bashrc.src"]
name = {h + "/.bashrc": "target", h + "/.decoyx": "decoy"}
rec = [name.get(j.get("new_path"), "torn") for j in recs]
wrong = sum(1 for t, g in zip(truth, rec) if t != g)
missed = sum(1 for t, g in zip(truth, rec) if t == "target" and g != "target")
print(f"  per rename: {wrong} of {len(truth)} recorded with another new name than the kernel used; {missed} of {truth.count('target')} real renames over .bashrc recorded as going elsewhere")
ren = [f for f in r["files"] if f["op"] == "rename" and f["path"] == h + "/.bashrc.src"]
to_b = sum(1 for f in ren if f.get("new_path") == h + "/.bashrc")
to_d = sum(1 for f in ren if f.get("new_path") == h + "/.decoyx")
other = len(ren) - to_b - to_d
pers = sum(1 for f in ren if f.get("persistence"))
print(f"  exit status: {sys.argv[3]}")
print(f"  recorded renames of .bashrc.src: {len(ren)}; recorded as to .bashrc: {to_b}; as to the decoy: {to_d}; as to another name: {other}; flagged persistence: {pers}")
PY
