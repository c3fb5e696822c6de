#!/bin/bash
# Runs one attack under sandbox-watch as a CI job would, and prints what came out of it:
# exit status, the attack's own account, `verify`, coverage, violations, key/.bashrc entries.
#
#   tests/attacks/run_attack.sh NAME [sandbox-watch options --] CMD...
#
# Env: SW (the binary; default target/release/sandbox-watch), OUT (results; default
# /tmp/sw-attacks), TIMEOUT (s, default 120), LINGER (default 0.3). Needs root, and the attack
# binaries built (`cargo build --release -p integration-tests --bins`). Each run gets
# OUT/NAME/{r.json,l.jsonl,stderr,home/} and ATTACK_HOME=OUT/NAME/home with a test key and
# .bashrc. The run uses --allow-net 10.0.0.0/8 so a loopback connect is a `network` violation.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SW=${SW:-$ROOT/target/release/sandbox-watch}
OUT=${OUT:-/tmp/sw-attacks}
name=$1; shift
extra=()
if printf '%s\n' "$@" | grep -qx -- '--'; then
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift
fi
d=$OUT/$name
rm -rf "$d"; mkdir -p "$d/home/.ssh"
export ATTACK_HOME=$d/home
printf -- '-----BEGIN TEST KEY-----\nnot a real key\n-----END TEST KEY-----\n' > "$d/home/.ssh/id_rsa"
echo '# test bashrc' > "$d/home/.bashrc"
export PATH=$ROOT/target/release:$ROOT/tests/attacks:$PATH
start=$(date +%s.%N)
timeout -k 5 "${TIMEOUT:-120}" "$SW" run --headless --linger "${LINGER:-0.3}" \
  --report "$d/r.json" --log "$d/l.jsonl" --allow-net 10.0.0.0/8 \
  --fail-on credential,network,persistence,lost "${extra[@]}" -- "$@" >"$d/stdout" 2>"$d/stderr"
rc=$?
end=$(date +%s.%N)
echo "== $name: exit $rc ($(python3 -c "print(round($end-$start,2))") s)"
grep '^attack' "$d/stderr" | sed 's/^/   /'
"$SW" verify "$d/l.jsonl" >"$d/verify" 2>&1; vrc=$?
echo "   verify: exit $vrc: $(head -c 300 "$d/verify")"
if [ -s "$d/r.json" ] && [ -f "$d/r.json" ] && [ ! -L "$d/r.json" ]; then
python3 - "$d/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["coverage"]
print(f"   coverage: events {c['events']} lost {c['lost']} lost_by_kind {c.get('lost_by_kind')} complete {c['complete']}")
print(f"   verdict {r['verdict']}; violations: {[(v['kind'], v['summary'][:90]) for v in r['violations']]}")
fs = [f for f in r['files'] if 'id_rsa' in f['path'] or '.bashrc' in f['path'] or '.bashrc' in (f.get('new_path') or '')]
print(f"   key/bashrc entries: {[(f['op'], f['path'][-30:], f.get('new_path')) for f in fs]}")
print(f"   connects: {[(n['op'], n.get('addr') or n.get('path'), n.get('port'), n['result']) for n in r['network'] if n['op'] == 'connect']}")
PY
else
  echo "   no report"
fi
