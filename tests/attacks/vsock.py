"""A connection over AF_VSOCK (to another VM, the host, or with vsock_loopback to CID 1,
this machine): no IP address at all.

    python3 vsock.py CID PORT MESSAGE

Prints one JSON line."""
import json
import socket
import sys

cid, port, message = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
s.settimeout(5)
s.connect((cid, port))
sent = s.send(message)
print(json.dumps({"attack": "vsock", "to": f"{cid}:{port}", "sent": sent,
                  "local": "%d:%d" % s.getsockname()}))
