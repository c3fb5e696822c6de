"""TCP Fast Open without connect(): the kernel opens the connection inside sendto() or
sendmsg() called with MSG_FASTOPEN and a destination. No connect syscall is made.

    python3 fastopen.py sendto|sendmsg ADDR PORT MESSAGE

Needs the client bit of net.ipv4.tcp_fastopen (1, the default). Without a cookie from the
server the data follows the handshake; with one (server bit 2 and TCP_FASTOPEN on the
listener, a second connection) it rides in the SYN. Prints one JSON line."""
import json
import socket
import sys

mode, addr, port, message = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
if mode == "sendto":
    sent = s.sendto(message, socket.MSG_FASTOPEN, (addr, port))
elif mode == "sendmsg":
    sent = s.sendmsg([message], [], socket.MSG_FASTOPEN, (addr, port))
else:
    sys.exit("usage: fastopen.py sendto|sendmsg ADDR PORT MESSAGE")
print(json.dumps({"attack": f"fastopen-{mode}", "to": f"{addr}:{port}", "sent": sent,
                  "local": "%s:%d" % s.getsockname()[:2], "peer": "%s:%d" % s.getpeername()[:2]}))
s.close()
