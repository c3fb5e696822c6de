#!/bin/sh
# The same without root: a user namespace (unshare -Urm) lets any user bind-mount.
. "$(dirname "$0")/lib.sh"
case_title "03 bind mount of ~/.ssh as an unprivileged user (unshare -Urm), key read through it" \
    "a credential read, the user namespace and mount recorded"
mkdir -p "$D/x"
chown -R nobody "$D"
chmod 755 "$D"
sw_run --user nobody -- unshare -Urm sh -c "mount --bind '$H/.ssh' '$D/x' && cat '$D/x/id_rsa' > /dev/null"
show
