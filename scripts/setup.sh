#!/usr/bin/env bash
# Set up a controller: the Python venv (.venv) with the pinned controller packages; with --tests,
# when run as root on Debian/Ubuntu, also the system packages the tests use (SSH test hosts in
# network namespaces, a systemd-nspawn host, systemd's unit checker, promtool, a headless browser).
# The demo sweep needs none of them. --system: those system packages only (CI installs them in the
# background while the venv and the demo run). Idempotent; the inference engine itself is installed
# by the llama_server role on each host.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") venv=1 system=0 ;;
  --tests) venv=1 system=1 ;;
  --system) venv=0 system=1 ;;
  *) echo "usage: scripts/setup.sh [--tests | --system]" >&2; exit 2 ;;
esac

APT_PACKAGES=(openssh-server iproute2 util-linux systemd systemd-container debootstrap prometheus chromium)

system_packages() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup: not root (or no apt): skipping ${APT_PACKAGES[*]} (the tests need them: SSH test hosts, promtool, chromium)"
    return
  fi
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

if [ "$system" -eq 1 ]; then
  system_packages
fi
if [ "$venv" -eq 0 ]; then
  exit 0
fi

python=python3.11
command -v "$python" >/dev/null || python=python3
[ -x .venv/bin/python ] || "$python" -m venv .venv
# The pinned controller packages and this checkout's own Python code (analysis/), editable: the
# action plugins import it inside ansible-playbook, and `python -m analysis` works from any folder.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
version=$(.venv/bin/ansible-playbook --version)
echo "setup: ready (${version%%$'\n'*})"
