#!/usr/bin/env python3
"""Ground truth for the real-agent tests: what `strace -f -ff -q -y -ttt` saw, as JSON.

    strace_truth.py PREFIX > truth.json

PREFIX is strace's `-o PREFIX` with `-ff` (one file per thread: PREFIX.TID). Threads are
folded into their thread group (by the clone flags), paths are the kernel's (`-y` prints the
path of the fd a call returned and of a dirfd, AT_FDCWD included), and `/proc/self/fd/N/...`
is resolved through the fds the process opened. Output:

    {"processes": [{"pid", "ppid", "execs": [{"at", "filename", "argv", "result"}],
                    "exit_code", "signal", "ended_at"}],
     "opens":   [{"pid", "at", "path", "given", "flags", "result"}],
     "unlinks": [{"pid", "at", "path", "result"}],
     "renames": [{"pid", "at", "path", "new_path", "result"}],
     "connects": [{"pid", "at", "family", "addr", "port", "path", "result"}],
     "namespaces": [{"pid", "at", "call", "args", "result"}]}

`result` is "ok" or the errno's name. Standard library only.
"""

import codecs
import glob
import json
import os
import re
import sys

LINE = re.compile(r"^(\d+\.\d+) (\w+)\((.*)\)\s+= (.*)$")
EXITED = re.compile(r"^(\d+\.\d+) \+\+\+ exited with (\d+) \+\+\+$")
KILLED = re.compile(r"^(\d+\.\d+) \+\+\+ killed by (SIG\w+)")
SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13, "SIGTERM": 15}


def decode(s):
    """A C string literal's body (strace's escapes) as text."""
    raw = codecs.escape_decode(s.encode("latin-1", "backslashreplace"))[0]
    return raw.decode("utf-8", "surrogateescape")


def strings(args):
    """Every string literal in an argument list, in order, with its end offset."""
    out, i = [], 0
    while True:
        i = args.find('"', i)
        if i < 0:
            return out
        j = i + 1
        while j < len(args) and args[j] != '"':
            j += 2 if args[j] == "\\" else 1
        out.append((decode(args[i + 1 : j]), j + 1))
        i = j + 1


def argv_of(args):
    """execve's argv array: the strings between the first '[' and its ']'."""
    start = args.find("[")
    if start < 0:
        return []
    argv, i = [], start + 1
    while i < len(args) and args[i] != "]":
        if args[i] == '"':
            j = i + 1
            while args[j] != '"':
                j += 2 if args[j] == "\\" else 1
            argv.append(decode(args[i + 1 : j]))
            i = j + 1
        else:
            i += 1
    return argv


def kernel_argv(path, filename, argv):
    """The argv the kernel gives a script it runs (binfmt_script): the #! line's interpreter and
    its one optional argument, then the file name as passed to execve, then argv[1:]."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return argv
    if not first.startswith(b"#!"):
        return argv
    words = first[2:].strip().split(None, 1)
    if not words:
        return argv
    head = [w.decode("utf-8", "surrogateescape") for w in words]
    return head + [filename] + argv[1:]


def result(ret):
    if ret.startswith("-1 "):
        return ret.split()[1]
    return "ok"


def fd_path(text):
    """The `<path>` strace -y appends to an fd (or AT_FDCWD)."""
    m = re.match(r"^-?\w+<(.*)>$", text.strip())
    return decode(m.group(1)) if m else None


def split_top(args):
    """Arguments split at top-level commas (outside strings, brackets and braces)."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(args):
        c = args[i]
        if c == '"':
            j = i + 1
            while j < len(args) and args[j] != '"':
                j += 2 if args[j] == "\\" else 1
            cur += args[i : j + 1]
            i = j + 1
            continue
        if c in "[{(<":
            depth += 1
        elif c in "]})>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        parts.append(cur.strip())
    return parts


def main():
    prefix = sys.argv[1]
    files = {}
    for path in glob.glob(glob.escape(prefix) + ".*"):
        tid = path.rsplit(".", 1)[1]
        if tid.isdigit():
            files[int(tid)] = path
    if not files:
        sys.exit("no strace output at %s.*" % prefix)

    lines = {}
    for tid, path in files.items():
        with open(path, encoding="latin-1") as f:
            lines[tid] = [l.rstrip("\n") for l in f]

    # Thread groups and parents from the clone calls; the first tid is the traced command.
    tgid, parent = {}, {}
    first = min(files, key=lambda t: lines[t][0].split(" ", 1)[0] if lines[t] else "9")
    tgid[first] = first
    pending = sorted(files)
    changed = True
    while changed:
        changed = False
        for tid in pending:
            if tid not in tgid:
                continue
            for l in lines[tid]:
                m = LINE.match(l)
                if not m or m.group(2) not in ("clone", "clone3", "fork", "vfork"):
                    continue
                child = m.group(4).split()[0]
                if not child.isdigit():
                    continue
                child = int(child)
                if child in tgid:
                    continue
                if "CLONE_THREAD" in m.group(3):
                    tgid[child] = tgid[tid]
                else:
                    tgid[child] = child
                    parent[child] = tgid[tid]
                changed = True

    procs = {}

    def proc(pid):
        return procs.setdefault(
            pid, {"pid": pid, "ppid": parent.get(pid), "execs": [], "exit_code": None, "signal": None, "ended_at": None}
        )

    out = {"opens": [], "unlinks": [], "renames": [], "connects": [], "namespaces": []}
    fds = {}
    cwd = {}

    def resolve(pid, dirfd, given):
        if given.startswith("/proc/self/fd/") or given.startswith("/proc/thread-self/fd/"):
            rest = given.split("/fd/", 1)[1]
            n, _, tail = rest.partition("/")
            base = fds.get(pid, {}).get(n)
            if base:
                return os.path.join(base, tail) if tail else base
        if given.startswith("/"):
            return os.path.normpath(given)
        base = fd_path(dirfd) if dirfd else None
        base = base or cwd.get(pid)
        return os.path.normpath(os.path.join(base, given)) if base else given

    events = []
    for tid, ls in lines.items():
        for l in ls:
            at = float(l.split(" ", 1)[0]) if l[:1].isdigit() else 0.0
            events.append((at, tid, l))
    events.sort()
    for at, tid, l in events:
        pid = tgid.get(tid, tid)
        p = proc(pid)
        m = EXITED.match(l)
        if m:
            if tid == pid:
                p["exit_code"], p["ended_at"] = int(m.group(2)), at
            continue
        m = KILLED.match(l)
        if m:
            if tid == pid:
                p["signal"], p["ended_at"] = SIGNALS.get(m.group(2), m.group(2)), at
            continue
        m = LINE.match(l)
        if not m:
            continue
        call, args, ret = m.group(2), m.group(3), m.group(4)
        for d in re.findall(r"AT_FDCWD<([^>]*)>", args):
            cwd[pid] = decode(d)
        parts = split_top(args)
        if call in ("execve", "execveat"):
            s = strings(args)
            filename, argv = (s[0][0] if s else None), argv_of(args)
            e = {"at": at, "filename": filename, "argv": argv, "result": result(ret)}
            if e["result"] == "ok" and filename:
                e["kernel_argv"] = kernel_argv(resolve(pid, None, filename), filename, argv)
            p["execs"].append(e)
        elif call in ("open", "openat", "openat2", "creat"):
            s = strings(args)
            if not s:
                continue
            given = s[0][0]
            dirfd = parts[0] if call in ("openat", "openat2") else None
            flags = parts[2] if call == "openat" and len(parts) > 2 else (parts[1] if len(parts) > 1 else "")
            if call == "creat":
                flags = "O_WRONLY|O_CREAT|O_TRUNC"
            r = result(ret)
            path = fd_path(ret.split()[0]) if r == "ok" else None
            if r == "ok":
                fds.setdefault(pid, {})[ret.split("<")[0].strip()] = path
            out["opens"].append(
                {"pid": pid, "at": at, "path": path or resolve(pid, dirfd, given), "given": given, "flags": flags, "result": r}
            )
        elif call in ("unlink", "unlinkat", "rmdir"):
            s = strings(args)
            dirfd = parts[0] if call == "unlinkat" else None
            out["unlinks"].append({"pid": pid, "at": at, "path": resolve(pid, dirfd, s[0][0]), "result": result(ret), "call": call})
        elif call in ("rename", "renameat", "renameat2"):
            s = strings(args)
            if call == "rename":
                old, new = resolve(pid, None, s[0][0]), resolve(pid, None, s[1][0])
            else:
                old, new = resolve(pid, parts[0], s[0][0]), resolve(pid, parts[2], s[1][0])
            out["renames"].append({"pid": pid, "at": at, "path": old, "new_path": new, "result": result(ret)})
        elif call == "connect":
            e = {"pid": pid, "at": at, "family": None, "addr": None, "port": None, "path": None, "result": result(ret)}
            fam = re.search(r"sa_family=(\w+)", args)
            e["family"] = fam.group(1) if fam else None
            port = re.search(r"sin6?_port=htons\((\d+)\)", args)
            e["port"] = int(port.group(1)) if port else None
            addr = re.search(r'inet_addr\("([^"]*)"\)|inet_pton\(AF_INET6, "([^"]*)"', args)
            if addr:
                e["addr"] = addr.group(1) or addr.group(2)
            sun = re.search(r'sun_path=(@?)"((?:[^"\\]|\\.)*)"', args)
            if sun:
                e["path"] = sun.group(1) + decode(sun.group(2))
            out["connects"].append(e)
        elif call in ("unshare", "setns"):
            out["namespaces"].append({"pid": pid, "at": at, "call": call, "args": args, "result": result(ret)})
        elif call in ("clone", "clone3", "fork", "vfork") and ret.split()[0].isdigit():
            child = int(ret.split()[0])
            if tgid.get(child) == child:
                if pid in cwd:
                    cwd[child] = cwd[pid]
                fds[child] = dict(fds.get(pid, {}))
        elif call == "chdir" and result(ret) == "ok":
            s = strings(args)
            if s:
                cwd[pid] = resolve(pid, None, s[0][0])
        elif call == "close" and result(ret) == "ok":
            fds.get(pid, {}).pop(parts[0].split("<")[0], None)

    out["processes"] = sorted(procs.values(), key=lambda p: p["pid"])
    out["first"] = first
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
