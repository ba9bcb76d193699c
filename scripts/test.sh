#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds the offline stand-in
# vLLM image for the Docker tests (reused when present), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tmux >/dev/null || need+=(tmux)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}"
fi

if docker info >/dev/null 2>&1; then
  scripts/build-standin.sh
else
  echo "Docker unreachable: the Docker tests will print SKIP"
fi

cargo test --all-targets -- --test-threads 2
