# Sourced by the attack scripts of issue 15. Each case gets a throwaway directory D with a
# throwaway HOME (H) holding a private key, shell start files and a git repository, runs its
# attack under `sandbox-watch run` and prints what the report says about the case's paths.
#
# SW: the sandbox-watch binary under test (default: this checkout's release build);
# ATTACK_BIN: where the attack_* programs are (default: this checkout's target/release);
# ATTACK_TMP: where the throwaway directories go (default /tmp).
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SW=${SW:-$ROOT/target/release/sandbox-watch}
B=${ATTACK_BIN:-$ROOT/target/release}
[ -x "$SW" ] || { echo "no sandbox-watch at $SW: build it (cargo xtask build) or set SW" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "the attacks need root (sandbox-watch loads BPF)" >&2; exit 2; }

D=$(mktemp -d "${ATTACK_TMP:-/tmp}/swattack.XXXXXX")
H=$D/home
mkdir -p "$H/.ssh" "$H/.config"
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAattackcasekey\n-----END OPENSSH PRIVATE KEY-----\n' > "$H/.ssh/id_rsa"
chmod 600 "$H/.ssh/id_rsa"
printf '# ~/.bashrc\nalias ll="ls -l"\n' > "$H/.bashrc"
printf '# ~/.profile\n' > "$H/.profile"
cleanup() { [ -n "$KEEP" ] || rm -rf "$D"; }
trap cleanup EXIT

case_title() { echo "=== $1"; echo "  expect (issue 15): $2"; }

# sw_run [sandbox-watch options...] -- CMD...: runs the attack under the monitor.
sw_run() {
    rm -f "$D/r.json" "$D/l.jsonl"
    HOME=$H "$SW" run --headless --linger 0.5 --report "$D/r.json" --log "$D/l.jsonl" --force \
        --fail-on credential,persistence "$@" > "$D/out.txt" 2> "$D/err.txt"
    RC=$?
    grep -v '^truth ' "$D/out.txt" | sed 's/^/  agent: /' | head -n 24
    grep -v -e '^$' -e '^- ' -e '^#' -e '^|' -e '^  ' "$D/err.txt" | sed 's/^/  stderr: /' | head -n 5
}

# show [SUBSTRING...]: what the report says (default: paths under D).
show() {
    [ $# -gt 0 ] || set -- "$D"
    if [ -f "$D/r.json" ]; then
        python3 "$HERE/summarize.py" "$D/r.json" "$RC" "$@"
    else
        echo "  no report (exit $RC): $(tail -n 3 "$D/err.txt")"
    fi
}
