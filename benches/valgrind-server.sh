#!/usr/bin/env bash
# Runs the server under a valgrind tool, for `museum-agent-load --spawn benches/valgrind-server.sh`.
# Only `serve` runs under valgrind (the tool's `key create` runs natively). The load tool kills this
# wrapper when it is done; valgrind then keeps running, so stop it with SIGTERM (its pid is in
# $VG_DIR/pid): the server drains and exits, and valgrind writes its output file.
#   VG_TOOL=callgrind|dhat|heaptrack (default callgrind)  VG_DIR=output folder (default /tmp/vg)
# heaptrack is not a valgrind tool but is run the same way (idle memory per session: see
# docs/performance.md); stop it the same way, then `heaptrack_print -f $VG_DIR/heaptrack.zst`.
#   VG_BIN=the server binary (default target/release/museum-agent, resolved from this script)
# See docs/performance.md for the commands built on it.
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${VG_BIN:-$HERE/target/release/museum-agent}
DIR=${VG_DIR:-/tmp/vg}
TOOL=${VG_TOOL:-callgrind}
if [ "${1:-}" != serve ]; then exec "$BIN" "$@"; fi
mkdir -p "$DIR"
case "$TOOL" in
  callgrind) OPTS=(--tool=callgrind "--callgrind-out-file=$DIR/callgrind.out") ;;
  dhat) OPTS=(--tool=dhat "--dhat-out-file=$DIR/dhat.out") ;;
  heaptrack)
    heaptrack -o "$DIR/heaptrack" "$BIN" "$@" >"$DIR/heaptrack.log" 2>&1 &
    # heaptrack is a script: the pid to signal is the server's (the newest one of this binary).
    pid=; for _ in $(seq 100); do pid=$(pgrep -n -f "^$BIN serve" || true); [ -n "$pid" ] && break; sleep 0.1; done
    echo "${pid:-$!}" > "$DIR/pid"
    wait
    exit 0 ;;
  *) echo "VG_TOOL: callgrind, dhat or heaptrack" >&2; exit 2 ;;
esac
valgrind "${OPTS[@]}" "$BIN" "$@" 2>"$DIR/valgrind.log" &
echo $! > "$DIR/pid"
wait
