#!/bin/sh
# Reads are deduplicated in the kernel by (tgid, dev, ino): an inode number reused by the
# filesystem after a delete, or a pid reused after an exit, folds new reads into old entries.
. "$(dirname "$0")/lib.sh"
case_title "08a files created, read and deleted in a loop (ext4 reuses the inode numbers)" \
    "20 reads, one per file (dedup key has the path and the process start)"
mkdir -p "$D/w"
sw_run -- python3 -c "
import os
d = '$D/w'
inos = set()
for i in range(20):
    p = '%s/f%02d' % (d, i)
    open(p, 'w').write('x')
    open(p).read()
    inos.add(os.stat(p).st_ino)
    os.unlink(p)
print('20 files, %d distinct inode numbers' % len(inos))
"
show "$D/w/"
echo "  read entries: $(python3 -c "import json; print(sum(1 for f in json.load(open('$D/r.json'))['files'] if f['op'] == 'read' and '$D/w/' in f['path']))")"

case_title "08b pid reuse: a process reads 300 files and exits, a new process gets its pid (ns_last_pid) and reads them too" \
    "300 + 300 reads counted, the second process's not folded into the first's"
mkdir -p "$D/r"
for i in $(seq 1 300); do echo "$i" > "$D/r/f$i"; done
sw_run -- python3 -c "
import os, sys
d = '$D/r'
def read_all():
    for i in range(1, 301):
        open('%s/f%d' % (d, i)).read()
pid = os.fork()
if pid == 0:
    read_all(); os._exit(0)
os.waitpid(pid, 0)
open('/proc/sys/kernel/ns_last_pid', 'w').write(str(pid - 1))
pid2 = os.fork()
if pid2 == 0:
    read_all(); os._exit(0)
os.waitpid(pid2, 0)
print('first reader pid %d, second reader pid %d' % (pid, pid2))
"
python3 - "$D/r.json" "$D/r/" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
reads = [f for f in r["files"] if f["op"] == "read" and sys.argv[2] in f["path"]]
by_pid = {}
for f in reads:
    by_pid.setdefault(f["pid"], [0, 0])
    by_pid[f["pid"]][0] += 1
    by_pid[f["pid"]][1] += f.get("count", 1)
print(f"  exit status: {r['exit']}")
for pid, (n, c) in by_pid.items():
    print(f"  pid {pid}: {n} read entries, counts summing to {c}")
PY
