#!/usr/bin/env bash
# Makes throw-away TLS material for Parity with openssl: a CA, a server certificate (for the
# names/IPs given) and a client certificate, laid out as the two tls_path folders expect:
#   OUT/server/{server.crt,server.key,ca.crt}   -> parity-server --tls_path=OUT/server (mutual TLS)
#   OUT/client/{client.crt,client.key,ca.crt}   -> agent config "tls_path": "OUT/client"
# Usage: deploy/gen-certs.sh OUT [DAYS] [SERVER_NAME...]   (default names: localhost 127.0.0.1)
set -euo pipefail
out=${1:?usage: gen-certs.sh OUT_DIR [DAYS] [SERVER_NAME...]}
days=${2:-30}
shift $(( $# >= 2 ? 2 : 1 ))
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(localhost 127.0.0.1)
san=""
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+="IP:$n,"; else san+="DNS:$n,"; fi
done
san=${san%,}
mkdir -p "$out/server" "$out/client"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
  -subj "/CN=Parity CA" -keyout "$tmp/ca.key" -out "$tmp/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null
leaf() {  # leaf NAME CN EXTKEYUSAGE SAN
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$tmp/$1.key" -out "$tmp/$1.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n%s\n' "$3" "$4" > "$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
    -days "$days" -extfile "$tmp/$1.ext" -out "$tmp/$1.crt" 2>/dev/null
}
leaf server "${names[0]}" serverAuth "subjectAltName=$san"
leaf client "parity-agent" clientAuth ""
cp "$tmp/server.crt" "$tmp/server.key" "$tmp/ca.crt" "$out/server/"
cp "$tmp/client.crt" "$tmp/client.key" "$tmp/ca.crt" "$out/client/"
echo "gen-certs: CA, server (${names[*]}) and client certificates in $out (valid $days days)"
