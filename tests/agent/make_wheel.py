#!/usr/bin/env python3
"""Writes a tiny pure-Python wheel (tinypkg 0.1.0) into DIR, for an offline `pip install
--no-index --find-links DIR tinypkg` in the real-agent session. Standard library only: a wheel
is a zip of the package, its METADATA, WHEEL and a RECORD of sha256 digests.

    make_wheel.py DIR
"""

import base64
import hashlib
import os
import sys
import zipfile

NAME, VERSION = "tinypkg", "0.1.0"
FILES = {
    f"{NAME}/__init__.py": 'def hello():\n    return "hello from tinypkg"\n',
    f"{NAME}-{VERSION}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
    f"{NAME}-{VERSION}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: make_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{NAME}-{VERSION}.dist-info/top_level.txt": f"{NAME}\n",
}


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{NAME}-{VERSION}-py3-none-any.whl")
    record = f"{NAME}-{VERSION}.dist-info/RECORD"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        lines = []
        for name, text in FILES.items():
            data = text.encode()
            z.writestr(name, data)
            lines.append(f"{name},{digest(data)},{len(data)}")
        lines.append(f"{record},,")
        z.writestr(record, "\n".join(lines) + "\n")
    print(path)


if __name__ == "__main__":
    main()
