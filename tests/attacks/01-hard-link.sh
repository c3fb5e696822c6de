#!/bin/sh
# Same inode, other path: a hard link to the key made before the capture, then both read.
. "$(dirname "$0")/lib.sh"
case_title "01 hard link to ~/.ssh/id_rsa made before the capture, then cat link key" \
    "a credential read of the inode through either path (path used and the rule's path)"
ln "$H/.ssh/id_rsa" "$D/innocent.txt"
sw_run -- sh -c "cat '$D/innocent.txt' '$H/.ssh/id_rsa' > /dev/null"
show
