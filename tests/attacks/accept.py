"""A listener that takes one inbound connection: accept(2), then reads what the peer sent.

    python3 accept.py PORTFILE [ADDR]

Listens on ADDR (default 127.0.0.1) port 0, writes the port to PORTFILE, accepts one
connection and prints one JSON line with the peer's address and what it sent."""
import json
import os
import socket
import sys

portfile, addr = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1")
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
srv = socket.socket(fam, socket.SOCK_STREAM)
srv.bind((addr, 0))
srv.listen()
port = srv.getsockname()[1]
with open(portfile + ".tmp", "w") as f:
    f.write(str(port))
os.rename(portfile + ".tmp", portfile)
srv.settimeout(10)
conn, peer = srv.accept()
data = conn.recv(256)
print(json.dumps({"attack": "accept", "listen": f"{addr}:{port}", "peer": "%s:%d" % peer[:2],
                  "received": data.decode(errors="replace")}))
