"""Runs each network attack under `sandbox-watch run` against a listener this harness controls,
and prints what the listener saw beside what sandbox-watch recorded.

    sudo python3 harness.py [--sw BIN] [--bins DIR] [--json OUT] [CASE…]   (no CASE: all)
    python3 harness.py --list

The listeners live in this process, in its own network namespace (the "host" one); a case
that runs in a sandbox (`unshare -n`) and setns()es back into it reaches them from there.
Every run is `sandbox-watch run --headless --report R --log L --allow-net 10.0.0.0/8
--fail-on network,outside [--user nobody] -- ATTACK…`: with it, an attack that leaves no
trace exits 0, and one that is seen gets status 3 (a `network` or `outside` violation).

Per case the result says: `delivered` (the listener got the attack's bytes), the status,
the report's network entries (and whether one names the real destination), the
violations, and a verdict: MISSED (delivered, no entry for it, no violation), WRONG (an
entry, but with another address or namespace than the kernel used), or SEEN."""
import argparse
import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOST_NS = f"/proc/{os.getpid()}/ns/net"
# Debian's python: the attacks may run as nobody, who cannot reach a python under /root.
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
CLONE_NEWNET = 0x40000000
SOL_TCP_LISTEN_OVERFLOWS = "ListenOverflows"


def host_netns() -> int:
    return int(os.readlink("/proc/self/ns/net")[5:-1])


# ---- listeners: each collects what arrived in `seen` (peer, bytes) ----

class Listener:
    def __init__(self):
        self.seen = []
        self.thread = None
        self.stop = threading.Event()

    def start(self):
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()
        return self

    def finish(self, grace=1.0):
        time.sleep(grace)
        self.stop.set()
        self.thread.join(5)
        return self.seen


class Tcp(Listener):
    """Accepts connections on 127.0.0.1; `slow`: keeps its accept queue full (backlog 0 and a
    connection of its own) until a SYN is dropped for it (ListenOverflows grows), so the
    attacker's connect sleeps in the kernel ~1 s until its SYN is sent again."""

    def __init__(self, slow=False, fam=socket.AF_INET, addr="127.0.0.1"):
        super().__init__()
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.bind((addr, 0))
        self.sock.listen(0 if slow else 16)
        self.port = self.sock.getsockname()[1]
        self.slow = slow
        self.filler = None
        if slow:
            self.filler = socket.create_connection((addr, self.port))

    @staticmethod
    def overflows() -> int:
        lines = open("/proc/net/netstat").read().splitlines()
        for names, values in zip(lines[::2], lines[1::2]):
            if names.startswith("TcpExt:"):
                row = dict(zip(names.split()[1:], values.split()[1:]))
                return int(row[SOL_TCP_LISTEN_OVERFLOWS])
        return 0

    def serve(self):
        self.sock.settimeout(0.2)
        if self.slow:
            before = self.overflows()
            deadline = time.time() + 20
            while self.overflows() == before and time.time() < deadline and not self.stop.is_set():
                time.sleep(0.01)
            filler, _ = self.sock.accept()  # room again: the retransmitted SYN gets in
            filler.close()
            self.filler.close()
        while not self.stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(3)
            data = b""
            try:
                while chunk := conn.recv(4096):
                    data += chunk
            except (socket.timeout, ConnectionResetError):
                pass
            self.seen.append({"peer": "%s:%d" % peer[:2], "data": data.decode(errors="replace")})
            conn.close()


def in_netns(path, make):
    """make() run in the network namespace `path` (by a thread of its own: setns moves only
    the calling thread); a socket keeps the namespace it was made in."""
    out = {}

    def body():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            out["error"] = os.strerror(ctypes.get_errno())
            return
        out["value"] = make()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise OSError(f"setns {path}: {out['error']}")
    return out["value"]


class Veth:
    """A namespace of the test's own (ip netns) joined to this one by a veth pair: `outer` here
    (no address), `inner` in it with 192.0.2.2/24."""

    def __init__(self):
        self.name = "swa-" + secrets.token_hex(3)
        self.outer, self.inner = self.name + "o", self.name + "i"
        self.path = f"/run/netns/{self.name}"
        for cmd in (["ip", "netns", "add", self.name],
                    ["ip", "link", "add", self.outer, "type", "veth", "peer", "name", self.inner, "netns", self.name],
                    ["ip", "link", "set", self.outer, "up"],
                    ["ip", "-n", self.name, "link", "set", "lo", "up"],
                    ["ip", "-n", self.name, "addr", "add", "192.0.2.2/24", "dev", self.inner],
                    ["ip", "-n", self.name, "link", "set", self.inner, "up"]):
            subprocess.run(cmd, check=True)

    def close(self):
        subprocess.run(["ip", "netns", "del", self.name])


class Udp(Listener):
    def __init__(self, netns=None, addr="127.0.0.1"):
        super().__init__()

        def make():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((addr, 0))
            return s

        self.sock = in_netns(netns, make) if netns else make()
        self.port = self.sock.getsockname()[1]

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                data, peer = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            self.seen.append({"peer": "%s:%d" % peer[:2], "data": data.decode(errors="replace")})


class Icmp(Listener):
    """A raw ICMP socket: a copy of every ICMP packet this namespace receives; keeps the
    echo requests carrying `marker`."""

    def __init__(self, marker):
        super().__init__()
        self.marker = marker.encode()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.port = 0

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                pkt, peer = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            ihl = (pkt[0] & 0xF) * 4
            if pkt[ihl] == 8 and self.marker in pkt:  # echo request
                self.seen.append({"peer": peer[0], "data": pkt[ihl + 8:].decode(errors="replace")})


class Vsock(Listener):
    def __init__(self):
        super().__init__()
        self.sock = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        self.sock.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(3)
            self.seen.append({"peer": "%d:%d" % peer, "data": conn.recv(4096).decode(errors="replace")})
            conn.close()


class Dialer(Listener):
    """The inbound case turned around: waits for the attack's listener port in `portfile`,
    connects to it and sends `marker`; `seen` is this side's own address (what the attack's
    accept should report as its peer)."""

    def __init__(self, portfile, marker):
        super().__init__()
        self.portfile, self.marker, self.port = portfile, marker, 0

    def serve(self):
        deadline = time.time() + 20
        while not os.path.exists(self.portfile) and time.time() < deadline:
            time.sleep(0.01)
        if not os.path.exists(self.portfile):
            return
        self.port = int(open(self.portfile).read())
        c = socket.create_connection(("127.0.0.1", self.port))
        c.sendall(self.marker.encode())
        self.seen.append({"peer": "%s:%d" % c.getsockname()[:2], "data": self.marker, "role": "dialer"})
        time.sleep(0.5)
        c.close()


# ---- the cases ----

def uring(bins, *a):
    return [os.path.join(bins, "uring-net"), *a]


def py(script, *a):
    return [PY, os.path.join(HERE, script), *a]


def cases(bins):
    """name → (what it does, listener factory, command factory(port, marker, tmp), options)."""
    sandbox = ["unshare", "-n"]
    return {
        "uring-tcp": ("io_uring CONNECT + SEND, unprivileged (nobody)", lambda m: Tcp(),
                      lambda p, m, t: uring(bins, "tcp", "127.0.0.1", str(p), m), {"user": "nobody"}),
        "uring-tcp-uring-socket": ("io_uring SOCKET + CONNECT + SEND, unprivileged", lambda m: Tcp(),
                                   lambda p, m, t: uring(bins, "--uring-socket", "tcp", "127.0.0.1", str(p), m),
                                   {"user": "nobody"}),
        "uring-tcp-async": ("io_uring CONNECT + SEND with IOSQE_ASYNC (run by io-wq worker threads)", lambda m: Tcp(),
                            lambda p, m, t: uring(bins, "--async", "tcp", "127.0.0.1", str(p), m), {"user": "nobody"}),
        "uring-tcp-sqpoll": ("io_uring CONNECT + SEND on an SQPOLL ring (submitted by the kernel's poll thread)",
                             lambda m: Tcp(), lambda p, m, t: uring(bins, "--sqpoll", "tcp", "127.0.0.1", str(p), m),
                             {"user": "nobody"}),
        "uring-tcp-setns": ("unshare -n, setns into the host namespace, io_uring CONNECT + SEND", lambda m: Tcp(),
                            lambda p, m, t: sandbox + uring(bins, "--setns", HOST_NS, "tcp", "127.0.0.1", str(p), m), {}),
        "uring-udp": ("io_uring SENDMSG with a destination, unprivileged", lambda m: Udp(),
                      lambda p, m, t: uring(bins, "udp", "127.0.0.1", str(p), m), {"user": "nobody"}),
        "uring-udp-setns": ("unshare -n, setns into the host namespace, io_uring SENDMSG", lambda m: Udp(),
                            lambda p, m, t: sandbox + uring(bins, "--setns", HOST_NS, "udp", "127.0.0.1", str(p), m), {}),
        "fastopen-sendto": ("TCP Fast Open: sendto(MSG_FASTOPEN, addr), no connect", lambda m: Tcp(),
                            lambda p, m, t: py("fastopen.py", "sendto", "127.0.0.1", str(p), m), {}),
        "fastopen-sendmsg": ("TCP Fast Open: sendmsg(MSG_FASTOPEN, addr), no connect", lambda m: Tcp(),
                             lambda p, m, t: py("fastopen.py", "sendmsg", "127.0.0.1", str(p), m), {}),
        "icmp-raw": ("raw ICMP socket: echo request carrying the data", lambda m: Icmp(m),
                     lambda p, m, t: py("icmp.py", "raw", "127.0.0.1", m), {}),
        "icmp-ping": ("unprivileged ping socket (ping_group_range opened for the run)", lambda m: Icmp(m),
                      lambda p, m, t: py("icmp.py", "ping", "127.0.0.1", m), {"user": "nobody", "ping": True}),
        "af-packet": ("AF_PACKET frame (IPv4/UDP inside) on a veth into a namespace of the test's",
                      "veth", lambda p, m, t, v: py("packet.py", v.outer, "192.0.2.1", "4242", "192.0.2.2", str(p), m),
                      {"veth": True, "expect_addr": "192.0.2.2"}),
        "af-packet-bypass": ("the same with PACKET_QDISC_BYPASS", "veth",
                             lambda p, m, t, v: py("packet.py", "--bypass", v.outer, "192.0.2.1", "4242", "192.0.2.2", str(p), m),
                             {"veth": True, "expect_addr": "192.0.2.2"}),
        "setns-udp": ("unshare -n, setns into the host namespace, UDP sendto", lambda m: Udp(),
                      lambda p, m, t: sandbox + py("udp.py", "--setns", HOST_NS, "sendto", "127.0.0.1", str(p), m), {}),
        "race-sockaddr": ("a thread rewrites the sockaddr to 10.66.66.66:443 while connect sleeps", lambda m: Tcp(slow=True),
                          lambda p, m, t: [os.path.join(bins, "connect-race"), "127.0.0.1", str(p), "10.66.66.66", "443", m], {}),
        "race-fd-swap": ("in a sandbox: a host-namespace socket's fd is dup2()ed over while connect sleeps",
                         lambda m: Tcp(slow=True),
                         lambda p, m, t: sandbox + [os.path.join(bins, "connect-fdswap"), HOST_NS, "127.0.0.1", str(p), m], {}),
        "race-fd-swap-and-sockaddr": ("both at once: fd swapped to a sandbox socket, sockaddr to 10.66.66.66:443",
                                      lambda m: Tcp(slow=True),
                                      lambda p, m, t: sandbox + [os.path.join(bins, "connect-fdswap"), HOST_NS, "127.0.0.1",
                                                                 str(p), m, "10.66.66.66", "443"], {}),
        "udp-sendto": ("UDP sendto to a port that is not 53", lambda m: Udp(),
                       lambda p, m, t: py("udp.py", "sendto", "127.0.0.1", str(p), m), {}),
        "udp-sendmsg": ("UDP sendmsg with a destination, not port 53", lambda m: Udp(),
                        lambda p, m, t: py("udp.py", "sendmsg", "127.0.0.1", str(p), m), {}),
        "udp-connected-send": ("UDP connect() then send()", lambda m: Udp(),
                               lambda p, m, t: py("udp.py", "send", "127.0.0.1", str(p), m), {}),
        "udp-connected-write": ("UDP connect() then write()", lambda m: Udp(),
                                lambda p, m, t: py("udp.py", "write", "127.0.0.1", str(p), m), {}),
        "vsock": ("AF_VSOCK connect to CID 1 (vsock_loopback)", lambda m: Vsock(),
                  lambda p, m, t: py("vsock.py", "1", str(p), m), {"vsock": True}),
        "accept": ("an inbound connection accepted on the agent's listener (accept(2))",
                   lambda m: None, lambda p, m, t: py("accept.py", os.path.join(t, "port")), {"dialer": True}),
        "uring-accept": ("an inbound connection taken with io_uring ACCEPT + RECV",
                         lambda m: None, lambda p, m, t: uring(bins, "accept", os.path.join(t, "port")), {"dialer": True}),
        "uring-listen-accept": ("io_uring BIND + LISTEN (6.11+) + ACCEPT",
                                lambda m: None, lambda p, m, t: uring(bins, "--uring-listen", "accept", os.path.join(t, "port")),
                                {"dialer": True}),
    }


def vsock_loopback() -> str:
    """'' when vsock connections to CID 1 stay on this machine (the vsock_loopback transport is
    there), else why not. Never tried by connecting: without that transport a connect to CID 1
    goes to the hypervisor (the virtio guest-to-host transport takes it)."""
    if not hasattr(socket, "AF_VSOCK"):
        return "no AF_VSOCK in this Python"
    if os.path.exists("/sys/module/vsock_loopback"):
        return ""
    try:
        with open("/proc/kallsyms") as f:
            if any(" vsock_loopback_" in line for line in f):
                return ""
    except OSError:
        pass
    return ("no vsock loopback transport (vsock_loopback is neither loaded nor built in), so no "
            "listener of the test's own can be reached over vsock here")


def summarize_entry(n):
    keep = ("op", "proto", "addr", "port", "path", "name", "result", "netns", "verdict", "count", "pid")
    return {k: n[k] for k in keep if k in n and n[k] is not None}


def run_case(name, spec, sw, tmp_root, wrap=None):
    what, make_listener, make_cmd, opts = spec
    marker = f"sw-exfil-{name}-{secrets.token_hex(4)}"
    tmp = tempfile.mkdtemp(prefix=f"sw-attack-{name}-", dir=tmp_root)
    os.chmod(tmp, 0o777)
    result = {"case": name, "what": what}
    if opts.get("vsock"):
        why = vsock_loopback()
        if why:
            result.update(verdict="NOT RUN", why=why)
            return result
    veth = Veth() if opts.get("veth") else None
    if veth:
        listener = Udp(netns=veth.path, addr="192.0.2.2")
    elif opts.get("dialer"):
        listener = Dialer(os.path.join(tmp, "port"), marker)
    else:
        listener = make_listener(marker)
    ping_range = None
    if opts.get("ping"):
        ping_range = open("/proc/sys/net/ipv4/ping_group_range").read()
        open("/proc/sys/net/ipv4/ping_group_range", "w").write("0 2147483647")
    report, log = os.path.join(tmp, "r.json"), os.path.join(tmp, "l.jsonl")
    argv = [sw, "run", "--headless", "--report", report, "--log", log,
            "--allow-net", "10.0.0.0/8", "--fail-on", "network,outside"]
    if "user" in opts:
        argv += ["--user", opts["user"]]
    cmd = make_cmd(listener.port, marker, tmp, veth) if veth else make_cmd(listener.port, marker, tmp)
    argv += ["--"] + cmd
    if wrap:  # another tracer instead of sandbox-watch (as root; --user is not applied)
        argv = wrap + cmd
    env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID", "SUDO_USER", "GITHUB_STEP_SUMMARY")}
    listener.start()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    finally:
        seen = listener.finish()
        if veth:
            veth.close()
        if ping_range is not None:
            open("/proc/sys/net/ipv4/ping_group_range", "w").write(ping_range)
    if wrap:
        result.update(command=" ".join(cmd), status=proc.returncode, listener_saw=seen,
                      delivered=any(marker in x["data"] for x in seen), verdict="WRAPPED",
                      output=proc.stdout, stderr=proc.stderr[-3000:])
        return result
    result.update(command=" ".join(cmd), status=proc.returncode,
                  attack_said=[json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")],
                  listener_saw=seen)
    if proc.returncode not in (0, 3) or not os.path.exists(report):
        result["stderr"] = proc.stderr[-2000:]
    delivered = any(marker in s["data"] for s in seen)
    result["delivered"] = delivered
    try:
        r = json.load(open(report))
    except (OSError, ValueError) as e:
        result.update(verdict="ERROR", why=f"no report: {e}")
        return result
    net = [summarize_entry(n) for n in r.get("network", [])]
    violations = [{"kind": v["kind"], "summary": v.get("summary")} for v in r.get("violations", [])
                  if v["kind"] in ("network", "outside")]
    result.update(report_verdict=r.get("verdict"), network=net, violations=violations,
                  gaps=r.get("probe", {}).get("gaps"), lost=r.get("coverage", {}).get("lost"))
    # What a right entry holds: the destination the kernel used, in the namespace it used.
    if opts.get("dialer"):
        peer_port = int(seen[0]["peer"].rsplit(":", 1)[1]) if seen else -1
        right = [n for n in net if n.get("port") == peer_port]
        listen = [n for n in net if n.get("op") == "listen"]
        if not delivered:
            verdict = "NOT DELIVERED"
        elif right:
            verdict = "SEEN"
        else:
            verdict = "MISSED (only the listen is recorded)" if listen else "MISSED"
    else:
        want_addr = opts.get("expect_addr", "127.0.0.1")
        want_port = None if isinstance(listener, Icmp) else listener.port
        right = [n for n in net if n.get("addr") == want_addr and n.get("port") in (want_port, None)
                 and n.get("netns") == host_netns()]
        if not delivered:
            verdict = "NOT DELIVERED"
        elif right:
            verdict = "SEEN"
        elif net or violations:
            verdict = "WRONG (recorded, but not where the data went)"
        else:
            verdict = "MISSED"
    result["verdict"] = verdict
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sw", default=os.path.join(ROOT, "target/release/sandbox-watch"))
    ap.add_argument("--bins", default=os.path.join(ROOT, "target/release"))
    ap.add_argument("--json", help="write every case's result here")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--wrap", help="run each attack under this command line instead of sandbox-watch "
                    "(split on spaces; e.g. a research tracer): its output is kept as the result")
    ap.add_argument("case", nargs="*")
    a = ap.parse_args()
    table = cases(a.bins)
    if a.list:
        for k, v in table.items():
            print(f"{k:24} {v[0]}")
        return
    if os.geteuid() != 0:
        sys.exit("run as root: sudo python3 harness.py")
    unknown = [c for c in a.case if c not in table]
    if unknown:
        sys.exit(f"no such case: {', '.join(unknown)} (see --list)")
    tmp_root = tempfile.mkdtemp(prefix="sw-attacks-")
    os.chmod(tmp_root, 0o755)
    results = []
    for name in a.case or table:
        res = run_case(name, table[name], a.sw, tmp_root, a.wrap.split() if a.wrap else None)
        results.append(res)
        print(json.dumps(res), flush=True)
        print(f"== {name}: {res['verdict']} (status {res.get('status')}, delivered {res.get('delivered')}, "
              f"{len(res.get('network') or [])} entries, {len(res.get('violations') or [])} violations)",
              file=sys.stderr, flush=True)
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
