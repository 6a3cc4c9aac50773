"""Reruns the calls a Parity server saved as error data and prints each verdict next to the
server's.

    python3 -m parity.repro ERROR_DATA_DIR [--api TEXT] [--bench-device auto|cpu|cuda[:N]]
                            [--rerun-on DEVICE]

ERROR_DATA_DIR is a ``ut_error_data{ts}/`` folder (it holds ``manifest.jsonl``) or a folder with
such folders (the server's ``run_ut.error_data_path``). Without ``--rerun-on``, the saved device
outputs are judged against a bench and a float64 golden computed here (``parity-repro``): the
verdict the server gave comes back. With ``--rerun-on DEVICE`` (``npu:0`` on the training host,
``cpu``), each call is first run again here on DEVICE with the saved inputs through
``torch.ops``, and those outputs are judged instead: is the fault still there, after a driver
or kernel change? Exit status: 0 every verdict matches the server's, 1 some differ, 2 bad usage
or unreadable data.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def _repro_binary():
    env = os.environ.get("PARITY_REPRO")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "parity-repro")]
    build = os.environ.get("PARITY_BUILD_DIR")
    if build:
        candidates.append(os.path.join(build, "server", "parity-repro"))
    candidates.append(os.path.join(here, "..", "..", "build", "server", "parity-repro"))
    for candidate in candidates:
        if os.path.exists(candidate):
            return os.path.abspath(candidate)
    found = shutil.which("parity-repro")
    if found:
        return found
    raise FileNotFoundError("parity-repro not found: set PARITY_REPRO, put it on PATH, or build "
                            "Parity (scripts/test.sh)")


def _manifests(directory):
    own = os.path.join(directory, "manifest.jsonl")
    if os.path.exists(own):
        return [own]
    return sorted(os.path.join(directory, d, "manifest.jsonl") for d in os.listdir(directory)
                  if os.path.exists(os.path.join(directory, d, "manifest.jsonl")))


def _flatten(value, out):
    if isinstance(value, (list, tuple)):
        for item in value:
            _flatten(item, out)
    else:
        out.append(value)
    return out


def _rerun(line, folder, device, out_dir):
    """Runs one saved call on `device` and writes its outputs where the device files were."""
    import torch  # pylint: disable=import-outside-toplevel
    namespace, name = line["op"].split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), name)
    op = getattr(packet, line.get("overload") or "default")

    def to_device(v):
        if isinstance(v, torch.Tensor):
            return v.to(device)
        if isinstance(v, (list, tuple)):
            return type(v)(to_device(x) for x in v)
        return v

    values = [to_device(torch.load(os.path.join(folder, f), map_location="cpu"))
              for f in line["files"]["inputs"]]
    args, kwargs = [], {}
    schema_args = op._schema.arguments  # pylint: disable=protected-access
    for arg, value in zip(schema_args, values):
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    with torch.no_grad():
        result = op(*args, **kwargs)
    if result is None:  # an op that returns nothing: what it wrote
        result = [v for arg, v in zip(schema_args, values)
                  if arg.alias_info is not None and arg.alias_info.is_write]
    outputs = _flatten(result, [])
    files = line["files"]["device"]
    if len(outputs) != len(files):
        raise RuntimeError(f"{line['api']}: {len(outputs)} outputs on {device}, "
                           f"{len(files)} saved")
    for value, rel in zip(outputs, files):
        path = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(value.cpu() if isinstance(value, torch.Tensor) else value, path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m parity.repro", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="a ut_error_data{ts} folder, or a folder holding them")
    parser.add_argument("--api", default="", help="only calls whose API name contains this")
    parser.add_argument("--bench-device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--rerun-on", metavar="DEVICE",
                        help="rerun each call here on DEVICE and judge those outputs")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.dir):
        print(f"parity.repro: {args.dir} is not a folder", file=sys.stderr)
        return 2
    try:
        binary = _repro_binary()
    except FileNotFoundError as e:
        print(f"parity.repro: {e}", file=sys.stderr)
        return 2
    cmd = [binary, f"--bench_device={args.bench_device}", f"--api={args.api}"]
    with tempfile.TemporaryDirectory(prefix="parity_rerun_") as rerun_dir:
        if args.rerun_on:
            manifests = _manifests(args.dir)
            if len(manifests) != 1:
                print(f"parity.repro: --rerun-on takes one ut_error_data folder; {args.dir} has "
                      f"{len(manifests)}", file=sys.stderr)
                return 2
            folder = os.path.dirname(manifests[0])
            with open(manifests[0], encoding="utf-8") as f:
                for text in f:
                    if not text.strip():
                        continue
                    line = json.loads(text)
                    if args.api and args.api not in line.get("api", ""):
                        continue
                    try:
                        _rerun(line, folder, args.rerun_on, rerun_dir)
                    except Exception as e:  # pylint: disable=broad-except
                        print(f"parity.repro: {line.get('api')}: cannot rerun on "
                              f"{args.rerun_on}: {e}", file=sys.stderr)
                        return 2
            cmd.append(f"--device_outputs={rerun_dir}")
        cmd.append(args.dir)
        return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
