#!/usr/bin/env bash
# One stand-in vLLM image of a given family and version, offline, on top of the base that
# scripts/build-standin.sh makes (built first if missing or stale). Layouts from
# shared/spec/real-images.md §1:
#
#   official, human  /usr/bin/python3 only (no `python` anywhere); vLLM in
#                    /usr/local/lib/python3.12/dist-packages/vllm; /usr/local/bin/vllm from
#                    v0.5.2; /vllm-workspace/benchmarks (four scripts, sonnet.txt,
#                    backend_request_func.py) from v0.5.0; WORKDIR /vllm-workspace
#   baseline         vLLM source tree at /opt/vllm_baseline (vllm/, benchmarks/, setup.py)
#                    installed editable (a __editable__ .pth in the site dir, no vllm in
#                    site-packages); /usr/bin/python3; vllm console script from v0.5.2; WORKDIR /
#   all              busybox (sh, sed, patch, ...), /etc/passwd, /tmp, /root; ENTRYPOINT
#                    `python3 -m vllm.entrypoints.openai.api_server` before v0.9.0, `vllm serve`
#                    from v0.9.0; labels nightshift.standin.{family,version,fail,src}
#
# Usage:
#   scripts/standin-image.sh --family official|human|baseline --version V [--fail MODE]
#                            [--no-bench] [--quiet] TAG [TAG...]
#
#   --fail MODE   ENV STANDIN_FAIL=MODE (aimv2, numpy, fa_utils, oom, hang, crash:N, portbug)
#   --no-bench    no benchmarks/ folder in the image
#   --report-version V  the package calls itself V (ISO-Bench human images: 0.0.0+local)
#                 while it behaves as --version (ENV STANDIN_ERA)
#
# Idempotent: the image built for the same family/version/fail/bench/source hash (kept as
# $NAME:k-<hash>) is tagged again instead of rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${NIGHTSHIFT_STANDIN_IMAGE:-nightshift-standin}
export NIGHTSHIFT_STANDIN_IMAGE=$NAME
export DOCKER_BUILDKIT=0

usage() {
  echo "usage: $0 --family official|human|baseline --version V [--fail MODE] [--no-bench] [--quiet] TAG [TAG...]" >&2
  exit 2
}
FAMILY= VERSION= FAIL= BENCH=1 QUIET= REPORT= TAGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --family) FAMILY=${2:-}; shift 2 || usage ;;
    --family=*) FAMILY=${1#*=}; shift ;;
    --version) VERSION=${2:-}; shift 2 || usage ;;
    --version=*) VERSION=${1#*=}; shift ;;
    --fail) FAIL=${2:-}; shift 2 || usage ;;
    --fail=*) FAIL=${1#*=}; shift ;;
    --no-bench) BENCH=; shift ;;
    --report-version) REPORT=${2:-}; shift 2 || usage ;;
    --report-version=*) REPORT=${1#*=}; shift ;;
    --quiet) QUIET=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    -*) echo "unknown option: $1" >&2; usage ;;
    *) TAGS+=("$1"); shift ;;
  esac
done
case "$FAMILY" in official|human|baseline) ;; *) echo "--family must be official, human or baseline" >&2; usage ;; esac
[[ "$VERSION" =~ ^v?[0-9]+\.[0-9]+ ]] || { echo "--version wants a vLLM version such as 0.6.3" >&2; usage; }
VERSION=${VERSION#v}
[ ${#TAGS[@]} -gt 0 ] || { echo "no TAG given" >&2; usage; }
T0=$(date +%s%N)

HASH=$( (cat standin/Cargo.toml $(find standin/src -name '*.rs' | LC_ALL=C sort) scripts/build-standin.sh scripts/standin-image.sh) | sha256sum | cut -c1-12)
label() { docker image inspect "$1" --format "{{index .Config.Labels \"$2\"}}" 2>/dev/null || true; }
if [ "$(label "$NAME:base" nightshift.standin.src)" != "$HASH" ] || [ -n "${NIGHTSHIFT_STANDIN_REBUILD:-}" ]; then
  scripts/build-standin.sh --base-only
fi

KEY="family=$FAMILY version=$VERSION report=$REPORT fail=$FAIL bench=${BENCH:-0} src=$HASH"
KEYHASH=$(printf '%s' "$KEY" | sha256sum | cut -c1-16)
say() { if [ -z "$QUIET" ]; then echo "$@"; fi; }
done_msg() {
  local ms=$(( ($(date +%s%N) - T0) / 1000000 ))
  local nb=
  [ -n "$BENCH" ] || nb=" no-bench"
  say "$1 ${TAGS[*]} ($FAMILY vLLM $VERSION${FAIL:+ fail=$FAIL}$nb) in $((ms / 1000)).$((ms % 1000 / 100)) s"
}

# Version comparison: ver_ge 0.5.2 → is $VERSION >= 0.5.2 (numeric fields, suffixes ignored).
ver_key() { echo "$1" | awk -F. '{ for (i = 1; i <= 4; i++) { n = $i; sub(/[^0-9].*/, "", n); printf "%05d", n + 0 } }'; }
VK=$(ver_key "$VERSION")
ver_ge() { [ "$VK" \> "$(ver_key "$1")" ] || [ "$VK" = "$(ver_key "$1")" ]; }

# Every build is also tagged $NAME:k-<key hash>: the handle for reuse (a label alone would also
# match images committed from containers of it, e.g. nightshift's fixed images).
KTAG="$NAME:k-$KEYHASH"
if [ -z "${NIGHTSHIFT_STANDIN_REBUILD:-}" ] && docker image inspect "$KTAG" >/dev/null 2>&1; then
  for t in "${TAGS[@]}"; do docker tag "$KTAG" "$t"; done
  done_msg "reused"
  exit 0
fi

CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
quiet() { "$@" >"$CTX/log" 2>&1 || { cat "$CTX/log" >&2; return 1; }; }
TAGARGS=(-t "$KTAG")
for t in "${TAGS[@]}"; do TAGARGS+=(-t "$t"); done
LABELS="nightshift.standin.role=family nightshift.standin.key=$KEYHASH nightshift.standin.src=$HASH nightshift.standin.family=$FAMILY nightshift.standin.version=$VERSION nightshift.standin.fail=$FAIL"

if [ -n "$FAIL" ]; then
  # The rot is one ENV line over the healthy image of the same family and version.
  NOBENCH=()
  [ -n "$BENCH" ] || NOBENCH=(--no-bench)
  REPORTARG=()
  [ -z "$REPORT" ] || REPORTARG=(--report-version "$REPORT")
  PARENT="$NAME:fam-$FAMILY-$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '_')${NOBENCH:+-nobench}${REPORT:+-r$(printf '%s' "$REPORT" | tr -c 'A-Za-z0-9_.-' '_')}"
  scripts/standin-image.sh --quiet --family "$FAMILY" --version "$VERSION" "${NOBENCH[@]}" "${REPORTARG[@]}" "$PARENT"
  printf 'FROM %s\nENV STANDIN_FAIL=%s\nLABEL %s\n' "$PARENT" "$FAIL" "$LABELS" > "$CTX/Dockerfile"
  quiet docker build -q "${TAGARGS[@]}" "$CTX"
  done_msg "built"
  exit 0
fi

ROOT=$CTX/rootfs
SITE=$ROOT/usr/local/lib/python3.12/dist-packages
mkdir -p "$ROOT/usr/bin" "$ROOT/usr/local/bin" "$SITE/numpy"
BINPATH=/usr/lib/vllm-standin/vllm-standin
ln -s "$BINPATH" "$ROOT/usr/bin/python3"
ln -s "$BINPATH" "$ROOT/usr/local/bin/pip"
ln -s "$BINPATH" "$ROOT/usr/local/bin/pip3"
if ver_ge 0.5.2; then ln -s "$BINPATH" "$ROOT/usr/local/bin/vllm"; fi
echo 'version = "2.2.6"' > "$SITE/numpy/version.py"

# A vllm package: what the stand-in reads (version.py) and what recipes and patches touch.
vllm_pkg() { # dir
  mkdir -p "$1/transformers_utils/configs" "$1/worker" "$1/entrypoints/openai"
  printf '# vllm (stand-in)\nfrom vllm.version import __version__\n' > "$1/__init__.py"
  printf '__version__ = "%s"\n' "${REPORT:-$VERSION}" > "$1/version.py"
  # The line the aimv2-exist-ok recipe rewrites (as in vLLM 0.7–0.9's ovis config).
  cat > "$1/transformers_utils/configs/ovis.py" <<'PY'
from transformers import AutoConfig, PretrainedConfig


class AIMv2Config(PretrainedConfig):
    model_type: str = "aimv2"


AutoConfig.register("aimv2", AIMv2Config)
PY
  echo '# model_runner' > "$1/worker/model_runner.py"
  echo '# api_server (stand-in)' > "$1/entrypoints/openai/api_server.py"
}

# benchmarks/: each script names its vLLM version in its first line (its era).
benchmarks() { # dir
  mkdir -p "$1"
  for s in serving throughput latency prefix_caching; do
    printf '# vllm-standin script for vLLM %s\n"""benchmark_%s.py of vLLM %s (stand-in: the image'"'"'s python3 runs it)."""\n' \
      "$VERSION" "$s" "$VERSION" > "$1/benchmark_$s.py"
  done
  printf '# vllm-standin script for vLLM %s\n"""Request functions of the serving benchmark (stand-in)."""\n' "$VERSION" > "$1/backend_request_func.py"
  cat > "$1/sonnet.txt" <<'TXT'
When night comes down and every lamp is lit,
The queue of work begins its patient climb;
Each prompt is weighed, and tokens follow it,
And every answer measured out in time.
The server wakes, the client counts the rate,
The first word slow, the others close behind;
What latency the morning will relate
Is written in the logs we leave behind.
So let the numbers stand as they were made,
Not rounded up to please a tired eye;
A failed request is honestly displayed,
A missing file will tell the reason why.
And when the sweep is done and dawn is near,
The table shows which change was worth the year.
TXT
}

case "$FAMILY" in
  official|human)
    vllm_pkg "$SITE/vllm"
    WORKDIR=/vllm-workspace
    mkdir -p "$ROOT/vllm-workspace"
    if [ -n "$BENCH" ] && ver_ge 0.5.0; then benchmarks "$ROOT/vllm-workspace/benchmarks"; fi
    ;;
  baseline)
    SRC=$ROOT/opt/vllm_baseline
    vllm_pkg "$SRC/vllm"
    if [ -n "$BENCH" ]; then benchmarks "$SRC/benchmarks"; fi
    printf 'from setuptools import setup\n\nsetup(name="vllm", version="%s")\n' "$VERSION" > "$SRC/setup.py"
    echo "/opt/vllm_baseline" > "$SITE/__editable__.vllm-$VERSION.pth"
    WORKDIR=/
    ;;
esac

if ver_ge 0.9.0; then ENTRY='["vllm", "serve"]'; else ENTRY='["python3", "-m", "vllm.entrypoints.openai.api_server"]'; fi
cat > "$CTX/Dockerfile" <<DF
FROM $NAME:base
COPY rootfs/ /
WORKDIR $WORKDIR
ENTRYPOINT $ENTRY
LABEL $LABELS
DF
if [ -n "$REPORT" ]; then echo "ENV STANDIN_ERA=$VERSION" >> "$CTX/Dockerfile"; fi
quiet docker build -q "${TAGARGS[@]}" "$CTX"
done_msg "built"
