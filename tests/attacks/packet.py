"""A UDP datagram written as a whole Ethernet frame (to the broadcast MAC) on an AF_PACKET
socket (root, CAP_NET_RAW): no IP socket, no connect, no sendto with an address. Sent on one
end of a veth pair, it arrives at the other, where a UDP listener on ADDR:PORT gets MESSAGE
from the source written in the frame. (On lo the frame comes back in too, but without the
route an IP socket's packet carries, and a 127/8 destination is then dropped as martian.)

    python3 packet.py [--bypass] IFACE SRC_ADDR SRC_PORT ADDR PORT MESSAGE

--bypass sets PACKET_QDISC_BYPASS (the frame goes to the driver without the qdisc layer).
Prints one JSON line."""
import json
import socket
import struct
import sys

args = sys.argv[1:]
bypass = args[:1] == ["--bypass"]
if bypass:
    args = args[1:]
if len(args) != 6:
    sys.exit("usage: packet.py [--bypass] IFACE SRC_ADDR SRC_PORT ADDR PORT MESSAGE")
iface, src, sport, dst, dport, message = args[0], args[1], int(args[2]), args[3], int(args[4]), args[5].encode()


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


udp = struct.pack("!HHHH", sport, dport, 8 + len(message), 0) + message  # checksum 0: none
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x5357, 0, 64, socket.IPPROTO_UDP, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
eth = b"\xff" * 6 + b"\0" * 6 + struct.pack("!H", 0x0800)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
if bypass:
    s.setsockopt(263, 20, 1)  # SOL_PACKET, PACKET_QDISC_BYPASS
s.bind((iface, 0))
sent = s.send(eth + ip + udp)
print(json.dumps({"attack": "af-packet" + ("-bypass" if bypass else ""), "iface": iface,
                  "frame_to": f"{dst}:{dport}", "frame_from": f"{src}:{sport}", "sent": sent}))
