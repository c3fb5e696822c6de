#!/bin/sh
# File operations through io_uring only.
. "$(dirname "$0")/lib.sh"
case_title "09 io_uring MKDIRAT, SYMLINKAT, LINKAT, OPENAT+READ of the key, OPENAT(write)+RENAMEAT over .bashrc, UNLINKAT, SETXATTR" \
    "each op recorded (names from the request's struct filename), credential and persistence flagged, or named per opcode in probe.gaps"
sw_run -- "$B/attack_uring_fileops" "$H"
show "$D"
python3 -c "import json; [print('  gap:', g) for g in json.load(open('$D/r.json'))['probe']['gaps']]"
