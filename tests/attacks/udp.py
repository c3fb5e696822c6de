"""UDP datagrams to a port other than 53, through each way of sending one:

    python3 udp.py [--setns NSPATH] sendto|sendmsg|send|write ADDR PORT MESSAGE

sendto and sendmsg give the destination with each datagram (no connect); send and write
use a socket connect()ed first (the connect is a syscall, the datagrams are not seen with
it). --setns NSPATH first moves the process into that network namespace (e.g. the host's,
from a sandbox made with `unshare -n`): the datagram leaves from there. Prints one JSON
line."""
import ctypes
import json
import os
import socket
import sys

args = sys.argv[1:]
if args[:1] == ["--setns"]:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(args[1], os.O_RDONLY)
    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        sys.exit(f"setns {args[1]}: {os.strerror(ctypes.get_errno())}")
    args = args[2:]
if len(args) != 4 or args[0] not in ("sendto", "sendmsg", "send", "write"):
    sys.exit("usage: udp.py [--setns NSPATH] sendto|sendmsg|send|write ADDR PORT MESSAGE")
mode, addr, port, message = args[0], args[1], int(args[2]), args[3].encode()
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
if mode == "sendto":
    sent = s.sendto(message, (addr, port))
elif mode == "sendmsg":
    sent = s.sendmsg([message], [], 0, (addr, port))
else:
    s.connect((addr, port))
    sent = s.send(message) if mode == "send" else os.write(s.fileno(), message)
netns = os.readlink("/proc/thread-self/ns/net")
print(json.dumps({"attack": f"udp-{mode}", "to": f"{addr}:{port}", "sent": sent,
                  "local": "%s:%d" % s.getsockname()[:2], "netns": netns}))
