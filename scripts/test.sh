#!/usr/bin/env bash
# The README's test command: every Rust test, then the kiosk page end to end in a real headless
# Chromium. Works on a fresh machine (as root): installs what is missing first (Chromium and
# nats-server from Debian, the e2e's npm packages).
set -euo pipefail
cd "$(dirname "$0")/.."

# Chromium from Debian (never a browser download), and the e2e's pinned npm packages.
if [ ! -x /usr/bin/chromium ]; then
    echo "== installing chromium (apt)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
# NATS with JetStream (Debian's nats-server 2.9) for the hub-across-processes tests; each test
# starts its own server on random loopback ports with a temporary store.
if ! command -v nats-server >/dev/null 2>&1; then
    echo "== installing nats-server (apt)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y nats-server
fi
if ! command -v node >/dev/null 2>&1; then
    echo "node (20+) and npm are needed for the browser e2e" >&2
    exit 1
fi
echo "== npm ci (tests/e2e)"
npm ci --prefix tests/e2e --no-audit --no-fund

echo "== cargo test"
cargo test --locked
# The e2e drives the server binary; cargo test built it already, this only makes sure.
cargo build --locked --bin museum-agent

echo "== browser e2e (tests/e2e)"
npm test --prefix tests/e2e
