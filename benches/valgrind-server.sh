#!/usr/bin/env bash
# Runs the server under a valgrind tool, for `museum-agent-load --spawn benches/valgrind-server.sh`.
# Only `serve` runs under valgrind (the tool's `key create` runs natively). The load tool kills this
# wrapper when it is done; valgrind then keeps running, so stop it with SIGTERM (its pid is in
# $VG_DIR/pid): the server drains and exits, and valgrind writes its output file.
#   VG_TOOL=callgrind|dhat (default callgrind)  VG_DIR=output folder (default /tmp/vg)
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
  *) echo "VG_TOOL: callgrind or dhat" >&2; exit 2 ;;
esac
valgrind "${OPTS[@]}" "$BIN" "$@" 2>"$DIR/valgrind.log" &
echo $! > "$DIR/pid"
wait
