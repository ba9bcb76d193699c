#!/usr/bin/env bash
# Build the stand-in vLLM images offline (no registry): FROM scratch + busybox-static from
# Debian's packages + the static Rust stand-in (standin/) as python/python3/vllm/pip.
# Idempotent: reuses the images when they exist and the stand-in's sources are unchanged
# (the tag carries a hash of them). Set NIGHTSHIFT_STANDIN_REBUILD=1 to force.
#
# Images (all share one base; the failure lives in the image, like dependency rot does):
#   nightshift-standin:latest          healthy, vLLM 0.8.5
#   nightshift-standin:aimv2           aimv2 conflict at import (fixed by recipe aimv2-exist-ok)
#   nightshift-standin:numpy           NumPy ABI (fixed by recipe numpy-lt-2)
#   nightshift-standin:oom             CUDA OOM during load
#   nightshift-standin:hang            CUDA-graph capture hang
#   nightshift-standin:crash           server dies 2 s after it is ready
#   nightshift-standin:portbug         vLLM 0.6.4 with the #8791 port bug
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
NAME=${NIGHTSHIFT_STANDIN_IMAGE:-nightshift-standin}
HASH=$( (cat standin/Cargo.toml standin/src/*.rs scripts/build-standin.sh) | sha256sum | cut -c1-12)
export DOCKER_BUILDKIT=0

if [ -z "${NIGHTSHIFT_STANDIN_REBUILD:-}" ] && docker image inspect "$NAME:src-$HASH" >/dev/null 2>&1; then
  missing=0
  for t in latest aimv2 numpy oom hang crash portbug; do
    docker image inspect "$NAME:$t" >/dev/null 2>&1 || missing=1
  done
  if [ $missing = 0 ]; then echo "stand-in images up to date ($NAME:src-$HASH)"; exit 0; fi
fi

# Its own target dir (static, another target triple): never invalidates the main build's cache.
TARGET_DIR=${STANDIN_TARGET_DIR:-${CARGO_TARGET_DIR:-$REPO/target}/standin}
( cd standin && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$TARGET_DIR \
    cargo build --release --target x86_64-unknown-linux-gnu --quiet )
BIN=$TARGET_DIR/x86_64-unknown-linux-gnu/release/vllm-standin

CTX=$(mktemp -d)
# The classic builder warns that it is deprecated on every call; show its output only on failure.
quiet() { "$@" >"$CTX/log" 2>&1 || { cat "$CTX/log" >&2; return 1; }; }
trap 'rm -rf "$CTX"' EXIT
ROOT=$CTX/rootfs
mkdir -p "$ROOT"
DEB=$(ls "${BUSYBOX_DEB_DIR:-$HOME/.cache/nightshift}"/busybox-static_*.deb 2>/dev/null | head -1 || true)
if [ -z "$DEB" ]; then
  mkdir -p "${BUSYBOX_DEB_DIR:-$HOME/.cache/nightshift}"
  # A fresh machine may have no package lists yet: update once and try again.
  ( cd "${BUSYBOX_DEB_DIR:-$HOME/.cache/nightshift}" && { apt-get download busybox-static >/dev/null 2>&1 \
      || { if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi; apt-get download busybox-static; }; } )
  DEB=$(ls "${BUSYBOX_DEB_DIR:-$HOME/.cache/nightshift}"/busybox-static_*.deb | head -1)
fi
dpkg -x "$DEB" "$CTX/bb"
mkdir -p "$ROOT/bin" "$ROOT/usr/bin" "$ROOT/usr/local/bin" "$ROOT/tmp" "$ROOT/root" "$ROOT/etc" "$ROOT/vllm-workspace"
cp "$CTX/bb/bin/busybox" "$ROOT/bin/busybox"
for app in $("$ROOT/bin/busybox" --list); do
  [ -e "$ROOT/bin/$app" ] || ln -s busybox "$ROOT/bin/$app"
done
cp "$BIN" "$ROOT/usr/local/bin/vllm-standin"
for n in python python3 vllm pip pip3; do ln -s vllm-standin "$ROOT/usr/local/bin/$n"; done
echo "root:x:0:0:root:/root:/bin/sh" > "$ROOT/etc/passwd"
SITE=$ROOT/usr/local/lib/python3.12/dist-packages
mkdir -p "$SITE/vllm/transformers_utils/configs" "$SITE/numpy"
# The line the aimv2-exist-ok recipe rewrites (as in vLLM 0.7–0.9's ovis config).
cat > "$SITE/vllm/transformers_utils/configs/ovis.py" <<'PY'
from transformers import AutoConfig, PretrainedConfig


class AIMv2Config(PretrainedConfig):
    model_type: str = "aimv2"


AutoConfig.register("aimv2", AIMv2Config)
PY
echo 'version = "2.2.6"' > "$SITE/numpy/version.py"
mkdir -p "$SITE/vllm/worker"
echo '# model_runner' > "$SITE/vllm/worker/model_runner.py"
cat > "$CTX/Dockerfile" <<'DF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin STANDIN_VERSION=0.8.5 STANDIN_ECHO_TOKEN=1
WORKDIR /vllm-workspace
ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]
DF
quiet docker build -q -t "$NAME:latest" -t "$NAME:src-$HASH" "$CTX"
variant() { # tag, env line
  printf 'FROM %s:latest\nENV %s\n' "$NAME" "$2" > "$CTX/Dockerfile.$1"
  quiet docker build -q -t "$NAME:$1" -f "$CTX/Dockerfile.$1" "$CTX/empty"
}
mkdir -p "$CTX/empty"
variant aimv2 "STANDIN_FAIL=aimv2"
variant numpy "STANDIN_FAIL=numpy"
variant oom "STANDIN_FAIL=oom"
variant hang "STANDIN_FAIL=hang"
variant crash "STANDIN_FAIL=crash:2"
variant portbug "STANDIN_FAIL=portbug STANDIN_VERSION=0.6.4"
# Older source tags only pin stale layers.
for t in $(docker images --format '{{.Tag}}' "$NAME" | grep '^src-' | grep -v "^src-$HASH$" || true); do
  docker rmi "$NAME:$t" >/dev/null 2>&1 || true
done
echo "built $NAME:{latest,aimv2,numpy,oom,hang,crash,portbug} (src-$HASH)"
