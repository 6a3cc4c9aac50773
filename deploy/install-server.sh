#!/usr/bin/env bash
# Installs a built parity-server as a systemd service on this host.
#   deploy/install-server.sh [BUILD_DIR] [PREFIX]     (defaults: build, /usr/local)
# Then install the certificates readable by the service's user (deploy/install-certs.sh DIR:
# server.crt, server.key, and ca.crt for mutual TLS; deploy/gen-certs.sh makes throw-away ones),
# check the configuration, and start:
#   sudo -u parity /usr/local/bin/parity-server --config=/etc/parity/server.json --check_config
#   sudo systemctl enable --now parity-server
# Re-running upgrades the binary and the unit; an existing /etc/parity/server.json is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=${2:-/usr/local}
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

if [[ ! -x "$build/server/parity-server" ]]; then
  echo "install-server: $build/server/parity-server not found; build first (scripts/test.sh)" >&2
  exit 1
fi
id parity >/dev/null 2>&1 || $SUDO useradd --system --home-dir /var/lib/parity --shell /usr/sbin/nologin parity
$SUDO install -D -m 0755 "$build/server/parity-server" "$prefix/bin/parity-server"
$SUDO install -D -m 0755 "$build/server/parity-repro" "$prefix/bin/parity-repro"
# torch_npu's fused operators: found by the server in ../lib/parity (parity.npu_reference).
$SUDO install -D -m 0755 "$build/server/libparity_npu_reference.so" "$prefix/lib/parity/libparity_npu_reference.so"
$SUDO install -D -m 0644 deploy/systemd/parity-server.service /etc/systemd/system/parity-server.service
$SUDO install -d -m 0750 -o parity -g parity /etc/parity /etc/parity/tls /var/lib/parity/results
if [[ ! -e /etc/parity/server.json ]]; then
  $SUDO install -m 0640 -o parity -g parity deploy/server.json /etc/parity/server.json
fi
$SUDO install -D -m 0644 -t "$prefix/share/doc/parity" docs/*.md
$SUDO systemctl daemon-reload 2>/dev/null || true
echo "install-server: installed $prefix/bin/parity-server, parity-repro and parity-server.service"
echo "  next: deploy/install-certs.sh CERT_DIR, then: sudo systemctl enable --now parity-server"
