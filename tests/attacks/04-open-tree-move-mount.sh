#!/bin/sh
# The new mount API: open_tree(OPEN_TREE_CLONE) of ~/.ssh, the key read through the detached
# tree's descriptor, then move_mount of the clone to another place and the key read there.
. "$(dirname "$0")/lib.sh"
case_title "04 open_tree + move_mount of ~/.ssh, key read through the detached tree and the new mount" \
    "credential reads by inode; open_tree and move_mount recorded"
sw_run -- unshare -m sh -c "mount --make-rprivate / && '$B/attack_open_tree' '$H/.ssh' id_rsa '$D/y'"
show "$D" id_rsa
