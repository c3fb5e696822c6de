#!/bin/sh
# pivot_root into ~/.ssh: the kernel-walked path of the key becomes /id_rsa.
. "$(dirname "$0")/lib.sh"
case_title "05 pivot_root into ~/.ssh (unshare -m), then read /id_rsa" \
    "a credential read (by inode); pivot_root recorded"
sw_run -- unshare -m "$B/attack_pivot_root" "$H/.ssh" id_rsa
show id_rsa
