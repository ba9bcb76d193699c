#!/usr/bin/env bash
# The rehearsal: the completed seed plan through preflight and the Docker runtime, on a
# box as strict as a real one (README "The rehearsal"; scripts/rehearsal/fixture.py). Ends
# with one line:
#   rehearsal: X/Y runnable commits with a complete 3-way result; named before the night: P;
#   failed during the night: F (cat=n, ...); runs: ...
#
#   scripts/rehearsal.sh [STORE_DIR] [--limit N] [--kills N] [--check] [--no-faults]
#                        [--no-missing-baselines]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
scripts/build-standin.sh >/dev/null
exec python3 scripts/rehearsal.py "$@"
