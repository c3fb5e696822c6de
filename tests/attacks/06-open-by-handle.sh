#!/bin/sh
# open_by_handle_at: the handle is taken before the capture (name_to_handle_at opens
# nothing), the capture sees only a handle and a descriptor of some directory.
. "$(dirname "$0")/lib.sh"
case_title "06 open_by_handle_at of the key (handle from name_to_handle_at before the capture)" \
    "an open like openat: path walked from the struct file, a credential read"
HANDLE=$("$B/attack_handle_open" handle "$H/.ssh/id_rsa")
echo "  handle (made before the capture): $HANDLE"
sw_run -- "$B/attack_handle_open" open "$D" "$HANDLE"
show "$D" id_rsa
