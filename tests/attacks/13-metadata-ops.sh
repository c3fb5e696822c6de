#!/bin/sh
# mkdir, chmod, chown, truncate (without an open), utimensat, setxattr: today's not_watched.
. "$(dirname "$0")/lib.sh"
case_title "13 mkdir ~/.ssh/new, chmod 666 key, chown nobody key, truncate(2) ~/.bashrc, utimensat (backdate) ~/.bashrc, setxattr user.x" \
    "each an entry (mkdir, chmod with the mode, chown, truncate: persistence, ...)"
sw_run -- python3 -c "
import os
h = '$H'
os.mkdir(h + '/.ssh/new')
os.chmod(h + '/.ssh/id_rsa', 0o666)
os.chown(h + '/.ssh/id_rsa', 65534, 65534)
os.truncate(h + '/.bashrc', 0)
os.utime(h + '/.bashrc', (946684800, 946684800))
os.setxattr(h + '/.profile', 'user.x', b'1')
print('done')
"
show "$D"
echo "  now: $(stat -c '%A %U %s %y %n' "$H/.ssh/id_rsa" "$H/.bashrc" | tr '\n' ';')"
python3 -c "import json; print('  not_watched:', json.load(open('$D/r.json'))['probe'].get('not_watched'))"
