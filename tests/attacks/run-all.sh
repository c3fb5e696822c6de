#!/bin/sh
# Runs every attack of issue 15 against SW (default: this checkout's release binary) and
# prints what the report of each says. Hold the kernel lock while it runs:
#   flock /tmp/sw-kernel.lock tests/attacks/run-all.sh
HERE=$(cd "$(dirname "$0")" && pwd)
for t in "$HERE"/[0-9][0-9]-*.sh; do
    sh "$t"
done
