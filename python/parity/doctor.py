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
import tempfile
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


def load_config(path, parity):
    """The config as the agent reads it: the agent's own reader and checks (the same errors,
    the same words as start()), then what the other checks need from it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        report(False, "config", f"{path}: {e.strerror}")
        return None
    if parity is None:
        report(False, "config", f"{path}: not checked: the agent did not load (above)")
        return None
    error = parity.load_agent().check_config(text, path)
    if error:
        report(False, "config", error)
        return None
    config = json.loads(text)  # valid: the agent read it
    tensor = config.get("tensor", {})
    plaintext = bool(config.get("parity", {}).get("plaintext"))
    report(True, "config", f"{path}: server {tensor.get('host')}:{tensor.get('port')}, "
           + ("plaintext" if plaintext
              else f"TLS files in {tensor.get('tls_path') or '(tls_path unset: ./)'}"))
    return config


def guarded(what, check, *args):
    """Runs one check; an exception is that check's failure, never the doctor's traceback."""
    try:
        return check(*args)
    except Exception as e:  # pylint: disable=broad-except
        return report(False, what, f"{type(e).__name__}: {e}")


def check_tls(config, base_dir):
    """The TLS files as the agent uses them (its reader already found ca.crt): ca.crt, and
    client.crt with client.key for mutual TLS when both are there."""
    tensor = config.get("tensor", {})
    tls_path = tensor.get("tls_path", "./")  # msprobe's default, as the agent's
    if config.get("parity", {}).get("plaintext") or tls_path == "":
        report(None, "TLS", "plaintext: no certificates used" if tls_path else
               "tls_path is empty: plaintext, as msprobe meant it (the agent warns)")
        return True
    if not os.path.isabs(tls_path):
        tls_path = os.path.join(base_dir, tls_path)
    ca = os.path.join(tls_path, "ca.crt")
    cert, key = os.path.join(tls_path, "client.crt"), os.path.join(tls_path, "client.key")
    mutual = os.path.exists(cert) or os.path.exists(key)
    for f in (ca, cert, key) if mutual else (ca,):
        if not os.access(f, os.R_OK):
            return report(False, "TLS", f"{f} is missing or unreadable (docs/tls.md)")
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        if mutual:
            context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        return report(False, "TLS", f"{tls_path}: {e} (a certificate and a key that do not match, "
                      "or an encrypted key: parity.tls_key_password_file)")
    report(True, "TLS", f"{tls_path}: " + ("ca.crt, client.crt and client.key load and match"
                                           if mutual else "ca.crt loads (no client certificate: a "
                                           "server whose tls_path has a ca.crt refuses it)"))
    return context


# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def speaks_grpc(sock):
    """None when the peer answers HTTP/2's preface with a SETTINGS frame, else why not."""
    sock.sendall(H2_PREFACE)
    answer = b""
    while len(answer) < 9:
        chunk = sock.recv(9 - len(answer))
        if not chunk:
            return "it closed the connection without answering HTTP/2"
        answer += chunk
    if answer.startswith(b"HTTP/"):
        return "it answers HTTP/1 (the server's metrics port?), not gRPC"
    if answer[:1] == b"\x15" or answer[:1] == b"\x16":
        return "it answers with TLS: the server runs with TLS, this config has parity.plaintext"
    if answer[3:4] != b"\x04":
        return "it does not answer as an HTTP/2 (gRPC) server"
    return None


def tls_refusal(e):
    """What an ssl error during the handshake with the server means, in words."""
    text = str(e)
    if isinstance(e, ssl.SSLCertVerificationError):
        return (f"the server's certificate does not verify against ca.crt ({e.verify_message}): "
                "the wrong ca.crt, or parity.server_name not the name in the server's certificate")
    if ("WRONG_VERSION_NUMBER" in text or "record layer" in text or "HTTP_REQUEST" in text
            or isinstance(e, ssl.SSLEOFError)):
        return ("that port does not speak TLS (the server's metrics port, or a server run with "
                "--plaintext?)")
    if any(w in text for w in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQUIRED",
                               "CERTIFICATE_UNKNOWN", "unknown ca", "certificate required")):
        return ("the server refused this client's certificate: client.crt is not signed by the CA "
                "the server trusts (its --tls_path's ca.crt)")
    return f"TLS handshake failed: {text}"


def check_reachable(config, tls_context=None):
    """A TCP connection, then what answers there: a gRPC server over HTTP/2, with the TLS the
    config asks for (the server's certificate checked against ca.crt, this client's accepted)."""
    host, port = config["tensor"]["host"], config["tensor"]["port"]
    first = host.split(",")[0].strip()
    if ":" in first and not first.startswith("["):
        first, port = first.rsplit(":", 1)[0], int(first.rsplit(":", 1)[1])
    name = first.strip("[]")
    try:
        sock = socket.create_connection((name, port), timeout=3)
    except OSError as e:
        return report(False, "server", f"{first}:{port} unreachable: {e} (is parity-server "
                      "running there, and the port open between the hosts?)")
    with sock:
        try:
            if tls_context is not None:
                tls_context.set_alpn_protocols(["h2"])
                server_name = config.get("parity", {}).get("server_name") or name
                with tls_context.wrap_socket(sock, server_hostname=server_name) as tls:
                    why = speaks_grpc(tls)
                # TLS 1.3 refuses a client certificate after the handshake: the server hangs up.
                if why == "it closed the connection without answering HTTP/2":
                    why = tls_refusal(ssl.SSLError("CERTIFICATE_REQUIRED"))
            else:
                why = speaks_grpc(sock)
                if why == "it closed the connection without answering HTTP/2":
                    why += " (a server run with TLS, while this config has parity.plaintext?)"
        except ssl.SSLError as e:
            why = tls_refusal(e)
        except socket.timeout:
            why = ("it did not answer within 3 s" + (": that port does not speak TLS (the "
                                                      "server's metrics port?)"
                                                      if tls_context is not None else ""))
        except OSError as e:
            why = f"no answer: {e}"
    if why:
        return report(False, "server", f"{first}:{port} accepts TCP connections but {why}")
    return report(True, "server", f"{first}:{port} answers as a gRPC server"
                  + (" over mutual TLS" if tls_context is not None else " (plaintext)"))


def agent_said(log_text):
    """The agent's own reason for a call that got no verdict, from its log lines."""
    for marker in ("refused the stream: ", "unreachable: ", "not started: "):
        for line in log_text.splitlines():
            if marker in line:
                return line[line.index(marker):]
    return ""


def check_one_call(parity, torch, config_path, timeout_s):
    # The agent logs to this process's stderr: kept (and shown again) to quote its reason.
    with tempfile.TemporaryFile(mode="w+") as log:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        try:
            counters, waited = one_call(parity, torch, config_path, timeout_s)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read()
    sys.stderr.write(text)
    if counters["verdicts"] >= 1 and counters["pass"] >= 1:
        return report(True, "one call judged", f"aten::add: pass in {waited:.1f} s")
    said = agent_said(text)
    return report(False, "one call judged",
                  f"{counters['captured']} captured, {counters['sent']} sent, "
                  f"{counters['verdicts']} verdicts ({counters['pass']} pass, "
                  f"{counters['rejected']} rejected), dropped {counters['dropped']}"
                  + (f"; the agent: {said}" if said else "; the agent's log above says why")
                  + " (docs/troubleshooting.md)")


def one_call(parity, torch, config_path, timeout_s):
    debugger = parity.PrecisionDebugger(config_path, step=[], rank=[], list=[], scope=[])
    debugger.start()
    torch.add(torch.ones(4), torch.arange(4.0))
    debugger.stop()
    start = time.monotonic()
    debugger.flush(timeout_s)
    waited = time.monotonic() - start
    debugger.close()
    return parity.counters(), waited  # after close(): what the session ended with


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m parity.doctor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.environ.get("PARITY_CONFIG"),
                        help="the training's config.json (default: $PARITY_CONFIG)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the verdict")
    args = parser.parse_args(argv)
    torch = guarded("torch", check_torch)
    parity = guarded("agent", check_agent) if torch else None
    config = None
    if args.config:
        config = guarded("config", load_config, args.config, parity or None)
    else:
        report(None, "config", "none given (--config): the server is not checked")
    if config:
        tls = guarded("TLS", check_tls, config, os.getcwd())  # the agent reads tls_path so
        tls_ok = tls is not False
        reachable = guarded("server", check_reachable, config,
                            tls if isinstance(tls, ssl.SSLContext) else None)
        if parity and tls_ok and reachable:
            guarded("one call judged", check_one_call, parity, torch, args.config, args.timeout)
    failed = sum(1 for r in RESULTS if r is False)
    print(f"parity doctor: {'every check passed' if not failed else f'{failed} check(s) failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
