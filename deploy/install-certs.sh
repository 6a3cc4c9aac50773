#!/usr/bin/env bash
# Installs the server's TLS files where the systemd unit reads them, readable by its user only.
#   deploy/install-certs.sh DIR [DEST] [USER]   (defaults: /etc/parity/tls, parity)
# DIR holds server.crt and server.key, and ca.crt for mutual TLS (crl.pem if you revoke client
# certificates): deploy/gen-certs.sh OUT makes throw-away ones in OUT/server, or take them from
# your PKI. Each file goes to DEST owned by USER, mode 0600 (keys) or 0644; DEST is 0750 USER.
# A plain `sudo cp` leaves them root's, and the server (user parity) cannot read its key.
set -euo pipefail
src=${1:?usage: install-certs.sh DIR [DEST] [USER]}
dest=${2:-/etc/parity/tls}
user=${3:-parity}
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
for f in server.crt server.key; do
  [[ -r "$src/$f" ]] || { echo "install-certs: $src/$f is missing (deploy/gen-certs.sh)" >&2; exit 1; }
done
group=$(id -gn "$user")
$SUDO install -d -m 0750 -o "$user" -g "$group" "$dest"
$SUDO install -m 0600 -o "$user" -g "$group" "$src/server.key" "$dest/server.key"
installed="server.key"
for f in server.crt ca.crt crl.pem; do
  if [[ -e "$src/$f" ]]; then
    $SUDO install -m 0644 -o "$user" -g "$group" "$src/$f" "$dest/$f"
    installed+=" $f"
  fi
done
echo "install-certs: $installed -> $dest (owner $user)"
