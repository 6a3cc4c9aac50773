#!/usr/bin/env bash
# Parity's demo, from a fresh clone: installs what is missing, builds the server and the agent,
# makes throw-away certificates, starts parity-server with mutual TLS on loopback, runs a real
# PyTorch training (docs/examples/train_mlp.py, 20 steps, forward and backward) with the agent
# enabled through its config.json and one planted harmful fault (gelu evaluated with the tanh
# approximation), prints a summary, and shuts the server down cleanly.
#   scripts/demo.sh [FAULT]          (default gelu_tanh; "none" for a clean run)
#   PARITY_BUILD_DIR   build folder (default: build)
#   PARITY_DEMO_DIR    where certificates, config and results go (default: a new temp folder)
set -euo pipefail
cd "$(dirname "$0")/.."
fault=${1:-gelu_tanh}
build_dir=${PARITY_BUILD_DIR:-build}
demo_dir=${PARITY_DEMO_DIR:-$(mktemp -d /tmp/parity-demo.XXXXXX)}
mkdir -p "$demo_dir"

step() { printf '\n== %s\n' "$*"; }

step "dependencies"
deploy/install-deps.sh

step "build (parity-server, libparity_agent.so)"
build_start=$(date +%s)
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build_dir" --target parity-server parity_agent -j "$(nproc)" | tail -n 1
echo "build: $(( $(date +%s) - build_start )) s"
demo_start=$(date +%s)

step "throw-away certificates (CA, server, client) in $demo_dir/certs"
deploy/gen-certs.sh "$demo_dir/certs" 2 >/dev/null
ls "$demo_dir/certs/server" "$demo_dir/certs/client" | paste -sd' '

step "parity-server with mutual TLS on 127.0.0.1"
"$build_dir/server/parity-server" --tls_path="$demo_dir/certs/server" --host=127.0.0.1 \
  --port=0 --metrics_host=127.0.0.1 --metrics_port=0 --port_file="$demo_dir/ports" \
  --output_dir="$demo_dir/results" --log_level=warning >"$demo_dir/server.log" 2>&1 &
server_pid=$!
stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then kill -TERM "$server_pid"; wait "$server_pid" || true; fi
}
trap stop_server EXIT
for _ in $(seq 600); do  # up to 60 s for the port file the server writes once listening
  [[ -s "$demo_dir/ports" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$demo_dir/server.log"; exit 1; }
  sleep 0.1
done
read -r port metrics_port <"$demo_dir/ports"
echo "listening on 127.0.0.1:$port (gRPC, mutual TLS), metrics on 127.0.0.1:$metrics_port"

step "agent config.json (msprobe's keys; the agent is enabled by this file alone)"
cat >"$demo_dir/config.json" <<JSON
{
  "task": "tensor",
  "level": "L1",
  "rank": [],
  "step": [],
  "tensor": {"online_run_ut": true, "host": "127.0.0.1", "port": $port,
             "tls_path": "$demo_dir/certs/client"},
  "parity": {"policy": "block"}
}
JSON
cat "$demo_dir/config.json"

fault_args=()
if [[ "$fault" != "none" ]]; then fault_args=(--fault "$fault"); fi
step "training: docs/examples/train_mlp.py, 20 steps, dropout 0.1, planted fault: $fault"
PARITY_AGENT_LIB="$build_dir/agent/libparity_agent.so" /usr/bin/python3 docs/examples/train_mlp.py \
  --config "$demo_dir/config.json" --steps 20 --dropout 0.1 "${fault_args[@]}"

step "summary"
set +e
PYTHONPATH=python /usr/bin/python3 -m parity.report "$demo_dir/results" \
  --metrics "http://127.0.0.1:$metrics_port/metrics"
report_status=$?
set -e

step "shutdown"
stop_server
trap - EXIT
grep "results:" "$demo_dir/server.log" | sed 's/.*results: /wrote /' || true
echo "server stopped cleanly; demo took $(( $(date +%s) - demo_start )) s after the build"
echo "everything is in $demo_dir"
if [[ "$fault" != "none" && $report_status -ne 1 ]]; then
  echo "demo: the planted fault was NOT reported" >&2
  exit 1
fi
if [[ "$fault" == "none" && $report_status -ne 0 ]]; then
  echo "demo: a clean run reported errors" >&2
  exit 1
fi
