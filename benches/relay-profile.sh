#!/usr/bin/env bash
# Instructions (callgrind) and heap allocations (DHAT) per relayed chunk, by difference: the same
# stream scenario with CHUNKS_A and CHUNKS_B chunks per reply, so start-up, registration and
# request costs cancel out. Repeatable on a busy machine (instruction counts, not time).
# Usage (after cargo build --release): benches/relay-profile.sh OUTDIR [callgrind|dhat]
# Environment: LOAD (load tool binary), SESSIONS (10), CHUNKS_A (50), CHUNKS_B (250), RATE (50), VG_BIN (server binary).
set -eu
OUT=$1; TOOL=${2:-callgrind}
HERE=$(cd "$(dirname "$0")/.." && pwd)
LOAD=${LOAD:-$HERE/target/release/museum-agent-load}
SESSIONS=${SESSIONS:-10}; A=${CHUNKS_A:-50}; B=${CHUNKS_B:-250}; RATE=${RATE:-50}
mkdir -p "$OUT"
total() { # the run's total: instructions (callgrind) or "bytes blocks" (dhat)
  if [ "$TOOL" = callgrind ]; then
    grep -m1 '^summary:' "$1/callgrind.out" | awk '{print $2}'
  else
    grep -m1 'Total:' "$1/valgrind.log" | sed 's/,//g' | awk '{print $(NF-4), $(NF-1)}'
  fi
}
for n in "$A" "$B"; do
  d="$OUT/$TOOL-$n"; rm -rf "$d"; mkdir -p "$d"
  VG_TOOL=$TOOL VG_DIR=$d "$LOAD" --spawn "$HERE/benches/valgrind-server.sh" \
    --json "$d/load.json" stream --sessions "$SESSIONS" --requests 1 --chunks "$n" --rate "$RATE" > "$d/load.txt"
  pid=$(cat "$d/pid")
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  echo "$n chunks: $(grep 'chunks relayed' "$d/load.txt" | awk '{print $3}') relayed, total $(total "$d")"
done
ra=$(grep 'chunks relayed' "$OUT/$TOOL-$A/load.txt" | awk '{print $3}')
rb=$(grep 'chunks relayed' "$OUT/$TOOL-$B/load.txt" | awk '{print $3}')
if [ "$TOOL" = callgrind ]; then
  ia=$(total "$OUT/$TOOL-$A"); ib=$(total "$OUT/$TOOL-$B")
  echo "instructions per relayed chunk: $(( (ib - ia) / (rb - ra) ))"
else
  read -r ba na <<<"$(total "$OUT/$TOOL-$A")"; read -r bb nb <<<"$(total "$OUT/$TOOL-$B")"
  echo "allocations per relayed chunk: $(echo "scale=2; ($nb - $na) / ($rb - $ra)" | bc)"
  echo "bytes allocated per relayed chunk: $(echo "scale=1; ($bb - $ba) / ($rb - $ra)" | bc)"
fi
