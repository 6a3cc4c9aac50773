"""Checks a training host's Parity install, one line a check, in the order things fail:

    python3 -m parity.doctor --config config.json

torch (version, C++ ABI, accelerators), the agent library and the torch it was built for, the
transport library it found, the configuration, the TLS files it names (readable, a certificate
and its key that match, a CA), the server (a TCP connection), and one real call: a session is
started with the configuration, one aten::add is captured, and its verdict is waited for.
Exit status 0 when every check passes, 1 otherwise (the failing line says why and what to do).
"""
import argparse
import json
import os
import socket
import ssl
import sys
import time

RESULTS = []


def report(ok, what, detail=""):
    RESULTS.append(ok)
    mark = {True: "ok  ", False: "FAIL", None: "--  "}[ok]
    print(f"[{mark}] {what}" + (f": {detail}" if detail else ""), flush=True)
    return ok


def check_torch():
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        report(False, "torch", f"not importable ({e}): install torch (and torch_npu) first")
        return None
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)  # pylint: disable=protected-access
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append(f"cuda x{torch.cuda.device_count()}")
    try:
        import torch_npu  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        devices.append(f"npu x{torch.npu.device_count()}")
    except ImportError:
        pass
    report(True, "torch", f"{torch.__version__} (C++11 ABI {abi}) at "
           f"{os.path.dirname(torch.__file__)}; devices: {', '.join(devices)}")
    return torch


def check_agent():
    try:
        import parity  # pylint: disable=import-outside-toplevel
        ops = parity.load_agent()
        info = json.loads(ops.build_info())
    except Exception as e:  # pylint: disable=broad-except
        report(False, "agent", f"{e}")
        return None
    path = os.environ.get("PARITY_AGENT_LIB") or parity._library_path()  # pylint: disable=protected-access
    report(True, "agent", f"{path}, built for {info['agent_torch']} (C++11 ABI "
           f"{int(info['cxx11_abi'])}), device type {info['device_type']}")
    ok = info["transport_abi"] == info["agent_transport_abi"]
    report(ok, "transport", f"{info['transport']}, ABI {info['transport_abi']}"
           + ("" if ok else f" (the agent speaks ABI {info['agent_transport_abi']}: "
                            "install both from one release)"))
    return parity


def load_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        report(False, "config", f"{path}: {e}")
        return None
    tensor = config.get("tensor", {})
    parity_section = config.get("parity", {})
    host, port = tensor.get("host"), tensor.get("port")
    if not host or not isinstance(port, int) or port <= 0:
        report(False, "config", f"{path}: tensor.host and tensor.port must name the server "
               f"(found host {host!r}, port {port!r})")
        return None
    plaintext = bool(parity_section.get("plaintext"))
    tls_path = tensor.get("tls_path", "")
    report(True, "config", f"{path}: server {host}:{port}, "
           + ("plaintext" if plaintext else f"TLS files in {tls_path or '(tls_path unset)'}"))
    return config


def check_tls(config, base_dir):
    tensor = config.get("tensor", {})
    if config.get("parity", {}).get("plaintext"):
        report(None, "TLS", "plaintext: no certificates used")
        return True
    tls_path = tensor.get("tls_path", "")
    if not tls_path:
        return report(False, "TLS", "tensor.tls_path is empty and parity.plaintext is not set")
    if not os.path.isabs(tls_path):
        tls_path = os.path.join(base_dir, tls_path)
    ca = os.path.join(tls_path, "ca.crt")
    cert, key = os.path.join(tls_path, "client.crt"), os.path.join(tls_path, "client.key")
    for f in (ca, cert, key):
        if not os.access(f, os.R_OK):
            return report(False, "TLS", f"{f} is missing or unreadable (docs/tls.md)")
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        return report(False, "TLS", f"{tls_path}: {e} (a certificate and a key that do not match, "
                      "or an encrypted key: parity.tls_key_password_file)")
    return report(True, "TLS", f"{tls_path}: ca.crt, client.crt and client.key load and match")


def check_reachable(config):
    host, port = config["tensor"]["host"], config["tensor"]["port"]
    first = host.split(",")[0].strip()
    if ":" in first and not first.startswith("["):
        first, port = first.rsplit(":", 1)[0], int(first.rsplit(":", 1)[1])
    try:
        with socket.create_connection((first.strip("[]"), port), timeout=5):
            pass
    except OSError as e:
        return report(False, "server", f"{first}:{port} unreachable: {e} (is parity-server "
                      "running there, and the port open between the hosts?)")
    return report(True, "server", f"{first}:{port} accepts connections")


def check_one_call(parity, torch, config_path, timeout_s):
    debugger = parity.PrecisionDebugger(config_path, step=[], rank=[], list=[], scope=[])
    debugger.start()
    torch.add(torch.ones(4), torch.arange(4.0))
    debugger.stop()
    start = time.monotonic()
    debugger.flush(timeout_s)
    counters = parity.counters()
    debugger.close()
    waited = time.monotonic() - start
    if counters["verdicts"] >= 1 and counters["pass"] >= 1:
        return report(True, "one call judged", f"aten::add: pass in {waited:.1f} s")
    return report(False, "one call judged",
                  f"{counters['captured']} captured, {counters['sent']} sent, "
                  f"{counters['verdicts']} verdicts ({counters['pass']} pass, "
                  f"{counters['rejected']} rejected), dropped {counters['dropped']}; the agent's "
                  "log above says why (docs/troubleshooting.md)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m parity.doctor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.environ.get("PARITY_CONFIG"),
                        help="the training's config.json (default: $PARITY_CONFIG)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the verdict")
    args = parser.parse_args(argv)
    torch = check_torch()
    parity = check_agent() if torch is not None else None
    config = None
    if args.config:
        config = load_config(args.config)
    else:
        report(None, "config", "none given (--config): the server is not checked")
    if config is not None:
        tls_ok = check_tls(config, os.getcwd())  # the agent reads a relative tls_path so
        reachable = check_reachable(config)
        if parity is not None and tls_ok and reachable:
            check_one_call(parity, torch, args.config, args.timeout)
    failed = sum(1 for r in RESULTS if r is False)
    print(f"parity doctor: {'every check passed' if not failed else f'{failed} check(s) failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
