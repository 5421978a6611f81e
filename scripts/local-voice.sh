#!/usr/bin/env bash
# A local speech stack next to the server, with no cloud account, in one command:
# installs (or reuses) the real servers and models (scripts/interop/setup.sh), starts
# faster-whisper-server (whisper-base, English and other languages) and local-tts-studio + piper
# (en_US-joe-medium, English) on free 127.0.0.1 ports, and prints the MUSEUM_AGENT__ settings that
# point the server at them. Ctrl-C stops both.
#
#   scripts/local-voice.sh                    # print the settings, serve until Ctrl-C
#   scripts/local-voice.sh --env-file FILE    # also write them to FILE (for `set -a; . FILE`)
#   scripts/local-voice.sh --llm              # also start llama.cpp with SmolLM2-135M (1 thread)
#
# Then, in another shell: `set -a; . FILE; set +a; cargo run --release` (or export the printed lines).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
env_file=""
with_llm=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --env-file) env_file="$2"; shift 2 ;;
    --llm) with_llm=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

"$here/interop/setup.sh"
cache="$("$here/interop/setup.sh" --print)"
py="$cache/venv/bin/python"

free_port() {
  "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pids=()
logs="$(mktemp -d)"
stop() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$logs"
}
trap stop INT TERM EXIT

# Starts `serve.py NAME --port PORT ...` and waits for its READY line (models load in seconds).
start() {
  local name="$1" port="$2"; shift 2
  "$py" "$here/interop/serve.py" "$name" --port "$port" "$@" >"$logs/$name.out" 2>"$logs/$name.err" &
  pids+=("$!")
  local pid=$!
  for _ in $(seq 1 600); do
    if grep -q "^READY $port" "$logs/$name.out" 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "local-voice.sh: the $name server exited:" >&2; tail -20 "$logs/$name.err" >&2; exit 1
    fi
    sleep 0.5
  done
  echo "local-voice.sh: the $name server did not start in 300 s" >&2; exit 1
}

stt_port="$(free_port)"; start stt "$stt_port"
tts_port="$(free_port)"; start tts "$tts_port"
settings=(
  "MUSEUM_AGENT__STT__PROVIDER=openai"
  "MUSEUM_AGENT__STT__BASE_URL=http://127.0.0.1:$stt_port/v1"
  "MUSEUM_AGENT__STT__MODEL=whisper-base"
  "MUSEUM_AGENT__STT__SEND_MODEL_NAME=true"
  "MUSEUM_AGENT__STT__API_KEY_ENV="
  "MUSEUM_AGENT__STT__TIMEOUT_SECONDS=60"
  "MUSEUM_AGENT__TTS__PROVIDER=openai"
  "MUSEUM_AGENT__TTS__BASE_URL=http://127.0.0.1:$tts_port/v1"
  "MUSEUM_AGENT__TTS__API_KEY_ENV="
  "MUSEUM_AGENT__TTS__RESPONSE_FORMAT=wav"
  "MUSEUM_AGENT__TTS__FIRST_BYTE_TIMEOUT_SECONDS=30"
  "MUSEUM_AGENT__TTS__READS_CJK=false"
)
if [[ $with_llm -eq 1 ]]; then
  llm_port="$(free_port)"; start llm "$llm_port" --sse-ping 10
  settings+=(
    "MUSEUM_AGENT__LLM__PROVIDER=openai"
    "MUSEUM_AGENT__LLM__BASE_URL=http://127.0.0.1:$llm_port/v1"
    "MUSEUM_AGENT__LLM__MODEL=smollm2"
    "MUSEUM_AGENT__LLM__API_KEY_ENV="
  )
fi

echo "# Local speech is up (Ctrl-C stops it). Settings for the server:"
printf '%s\n' "${settings[@]}"
if [[ -n "$env_file" ]]; then
  printf '%s\n' "${settings[@]}" > "$env_file"
  echo "# written to $env_file"
fi
wait "${pids[@]}"
