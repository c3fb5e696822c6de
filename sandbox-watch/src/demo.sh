#!/bin/sh
# The bundled demo agent session: what coding agents do in a few seconds.
# Runs in $DEMO_DIR with HOME=$DEMO_DIR/home; touches nothing outside it.
set -eu
cd "$DEMO_DIR"
export HOME="$DEMO_DIR/home"
mkdir -p "$HOME" project
cd project

echo "agent: writing code and committing it"
git init -q .
git config user.email agent@example.com
git config user.name "Demo Agent"
printf 'def is_leap(year):\n    return year %% 4 == 0\n' > leap.py
git add leap.py
git commit -qm "Add a leap-year check"

echo "agent: fixing a bug and running the code"
sed -i 's/return year % 4 == 0/return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)/' leap.py
python3 -c 'import leap; print("1900 leap?", leap.is_leap(1900))'
git commit -qam "Fix century years"

echo "agent: installing a helper package into a virtualenv"
# A wheel of one module, made here (a zip with its dist-info), so pip needs no network.
python3 - <<'PY'
import zipfile
with zipfile.ZipFile("leapcal-1.0.0-py3-none-any.whl", "w") as z:
    z.writestr("leapcal/__init__.py", "DAYS = 366\n")
    z.writestr("leapcal-1.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: leapcal\nVersion: 1.0.0\n")
    z.writestr("leapcal-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: demo\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("leapcal-1.0.0.dist-info/RECORD", "")
PY
if python3 -m pip --version > /dev/null 2>&1; then
    python3 -m venv --without-pip .venv
    python3 -m pip --python .venv/bin/python install -q --no-index --no-deps \
        --disable-pip-version-check leapcal-1.0.0-py3-none-any.whl
else
    echo "agent: no pip here, no package installed"
fi
rm leapcal-1.0.0-py3-none-any.whl

echo "agent: serving the docs on loopback and fetching them"
python3 - <<'PY'
import http.server, threading, urllib.request
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = "http://127.0.0.1:%d/leap.py" % server.server_address[1]
print("fetched", len(urllib.request.urlopen(url).read()), "bytes from", url)
server.shutdown()
PY

echo "agent: reading a token it was not asked to read"
printf 'machine api.example.com login demo password not-a-real-secret\n' > "$HOME/.netrc"
cat "$HOME/.netrc" > /dev/null

echo "agent: leaving a process behind"
setsid sleep 30 > /dev/null 2>&1 < /dev/null &
echo "agent: done"
