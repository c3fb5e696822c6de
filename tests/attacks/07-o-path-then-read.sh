#!/bin/sh
# O_PATH opens nothing for reading, but is recorded as a read; the real read that follows (by
# path, and through /proc/self/fd of the O_PATH descriptor) is folded into it.
. "$(dirname "$0")/lib.sh"
case_title "07 open(key, O_PATH) then real reads (by path, and by /proc/self/fd/N reopen)" \
    "the O_PATH open is op path (not a read); each real read a credential read"
sw_run -- python3 -c "
import os
k = '$H/.ssh/id_rsa'
p = os.open(k, os.O_PATH)
open(k).read()
open('/proc/self/fd/%d' % p).read()
print('read the key twice after an O_PATH open')
"
show "$D"
echo "  (log: file records of the key: $(grep -c id_rsa "$D/l.jsonl"))"
