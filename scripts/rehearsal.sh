#!/usr/bin/env bash
# The rehearsal: the seeds' real perf commands through the Docker runtime, on stand-in
# images that behave like real ones (no bare python, strict clients, datasets that must
# exist). Ends with one line:
#   rehearsal: X/Y runnable commits with a complete 3-way result; runs: S success, F failed (cat=n, ...), K skipped
#
#   scripts/rehearsal.sh [STORE_DIR] [--faults] [--limit N] [--kills N] [--check]
#
# --faults: images carry the dependency faults the seed reports name (aimv2, numpy), so
# the fixes run too. --limit N: N commits spread across the list (CI's short cut).
# --check: exit 1 unless every runnable commit got its 3-way result.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
scripts/build-standin.sh >/dev/null
exec python3 scripts/rehearsal.py "$@"
