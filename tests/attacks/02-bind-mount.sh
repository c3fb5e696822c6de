#!/bin/sh
# Same inode, other path: ~/.ssh bind-mounted elsewhere in a private mount namespace (root).
. "$(dirname "$0")/lib.sh"
case_title "02 bind mount of ~/.ssh (root, unshare -m), key read through the mount" \
    "a credential read (the inode is the key's), the mount recorded"
mkdir -p "$D/x"
sw_run -- unshare -m sh -c "mount --make-rprivate / && mount --bind '$H/.ssh' '$D/x' && cat '$D/x/id_rsa' > /dev/null"
show
