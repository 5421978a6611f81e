#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/interop/setup.sh: Debian installs done the same careful
# way everywhere. `apt_install_missing PKG...` installs only the packages that are not installed
# yet, with --no-install-recommends, as root or through sudo; it refuses an install that would
# upgrade or remove an installed package (nothing here runs apt-get upgrade), and no package may
# start a service while it installs (nats-server's is disabled afterwards).

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = 'install ok installed' ]; }

apt_install_missing() {
    local missing=() p
    for p in "$@"; do
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
        printf '#!/bin/sh\n# temporary, written by museum-agent scripts/lib/apt.sh\nexit 101\n' \
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

