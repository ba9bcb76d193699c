#!/usr/bin/env python3
"""vLLM's own source at a few releases, for the tests that read it (tests/preflight_source.rs):
each release's sdist from PyPI (its sha256 checked against PyPI's index), of which only the
argparse definitions and the files behind known failing option combinations are kept,
under DIR/<version>/<path>. Nothing of vLLM goes into the repository.

    scripts/vllm-sources.py [DIR]     (default ~/.cache/nightshift/real-vllm/sources)

Prints DIR. Kept files are reused: a second run downloads nothing.
"""
import hashlib, io, json, os, sys, tarfile, urllib.request

RELEASES = ["0.5.5", "0.6.0", "0.6.4.post1", "0.6.5"]
FILES = [
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/config.py",
    "vllm/worker/model_runner.py",
    "benchmarks/benchmark_serving.py",
    "benchmarks/benchmark_latency.py",
    "benchmarks/benchmark_throughput.py",
]
INDEX = "https://pypi.org/simple/vllm/"


def main():
    default = os.path.join(os.path.expanduser("~"), ".cache", "nightshift", "real-vllm", "sources")
    out = sys.argv[1] if len(sys.argv) > 1 else default
    todo = [v for v in RELEASES if not os.path.exists(os.path.join(out, v, ".complete"))]
    if todo:
        req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            files = {f["filename"]: f for f in json.load(r)["files"]}
    for v in todo:
        f = files[f"vllm-{v}.tar.gz"]
        with urllib.request.urlopen(f["url"], timeout=300) as r:
            data = r.read(64 << 20)
        if hashlib.sha256(data).hexdigest() != f["hashes"]["sha256"]:
            sys.exit(f"vllm-{v}.tar.gz: sha256 differs from PyPI's index")
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            for path in FILES:
                try:
                    member = t.getmember(f"vllm-{v}/{path}")
                except KeyError:
                    continue
                dest = os.path.join(out, v, path)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as w:
                    w.write(t.extractfile(member).read())
        open(os.path.join(out, v, ".complete"), "w").close()
        print(f"vllm-sources: {v} kept", file=sys.stderr)
    print(out)


if __name__ == "__main__":
    main()
