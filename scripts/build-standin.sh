#!/usr/bin/env bash
# Build the stand-in vLLM images offline (no registry): a base image FROM scratch with
# busybox-static (from Debian's package) and the static Rust stand-in (standin/), then image
# *families* on top of it with scripts/standin-image.sh (official, human, baseline layouts;
# see shared/spec/real-images.md §1).
#
# Idempotent: reuses the images when they exist and the stand-in's sources are unchanged
# (labels carry a hash of them). Set NIGHTSHIFT_STANDIN_REBUILD=1 to force.
#
#   scripts/build-standin.sh              base + the test tags below
#   scripts/build-standin.sh --base-only  just the base (standin-image.sh calls this)
#
# The base: $NAME:base, label nightshift.standin.src=<hash>. It has busybox, /etc/passwd,
# /tmp, /root and the binary at /usr/lib/vllm-standin/vllm-standin, but no python3, vllm or
# pip: the families decide where those live. Like a CUDA runtime image it has apt-get (the
# stand-in, with NVIDIA's repo listed) but no nvcc, gcc or ccache: builds install them.
#
# Test tags (the failure lives in the image, like dependency rot does):
#   nightshift-standin:latest          official family, vLLM 0.8.5 (python3 only, no `python`)
#   nightshift-standin:aimv2           + aimv2 conflict at import (fixed by recipe aimv2-exist-ok)
#   nightshift-standin:numpy           + NumPy ABI (fixed by recipe numpy-lt-2)
#   nightshift-standin:oom             + CUDA OOM during load
#   nightshift-standin:hang            + CUDA-graph capture hang
#   nightshift-standin:crash           + server dies 2 s after it is ready
#   nightshift-standin:portbug         official family, vLLM 0.6.4, the #8791 port bug
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
NAME=${NIGHTSHIFT_STANDIN_IMAGE:-nightshift-standin}
export NIGHTSHIFT_STANDIN_IMAGE=$NAME
# Same recipe as standin-image.sh's: sources of the binary and of both scripts.
HASH=$( (cat standin/Cargo.toml $(find standin/src -name '*.rs' | LC_ALL=C sort) scripts/build-standin.sh scripts/standin-image.sh) | sha256sum | cut -c1-12)
export DOCKER_BUILDKIT=0
BASE_ONLY=
[ "${1:-}" = "--base-only" ] && BASE_ONLY=1
T0=$(date +%s%N)

label() { docker image inspect "$1" --format "{{index .Config.Labels \"$2\"}}" 2>/dev/null || true; }

TAGS="latest aimv2 numpy oom hang crash portbug"
if [ -z "${NIGHTSHIFT_STANDIN_REBUILD:-}" ] && [ "$(label "$NAME:base" nightshift.standin.src)" = "$HASH" ]; then
  if [ -n "$BASE_ONLY" ]; then exit 0; fi
  missing=0
  for t in $TAGS; do
    [ "$(label "$NAME:$t" nightshift.standin.src)" = "$HASH" ] || missing=1
  done
  if [ $missing = 0 ]; then echo "stand-in images up to date ($NAME src-$HASH)"; exit 0; fi
fi

if [ -z "${NIGHTSHIFT_STANDIN_REBUILD:-}" ] && [ "$(label "$NAME:base" nightshift.standin.src)" = "$HASH" ]; then
  : # base current; only family images are missing
else
  # Its own target dir (static, another target triple): never invalidates the main build's cache.
  TARGET_DIR=${STANDIN_TARGET_DIR:-${CARGO_TARGET_DIR:-$REPO/target}/standin}
  ( cd standin && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$TARGET_DIR \
      cargo build --release --target x86_64-unknown-linux-gnu --quiet )
  BIN=$TARGET_DIR/x86_64-unknown-linux-gnu/release/vllm-standin

  CTX=$(mktemp -d)
  trap 'rm -rf "$CTX"' EXIT
  # The classic builder warns that it is deprecated on every call; show its output only on failure.
  quiet() { "$@" >"$CTX/log" 2>&1 || { cat "$CTX/log" >&2; return 1; }; }
  ROOT=$CTX/rootfs
  mkdir -p "$ROOT"
  DEBDIR=${BUSYBOX_DEB_DIR:-$HOME/.cache/nightshift}
  DEB=$(ls "$DEBDIR"/busybox-static_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$DEB" ]; then
    mkdir -p "$DEBDIR"
    # A fresh machine may have no package lists yet: update once and try again.
    ( cd "$DEBDIR" && { apt-get download busybox-static >/dev/null 2>&1 \
        || { if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi; apt-get download busybox-static; }; } )
    DEB=$(ls "$DEBDIR"/busybox-static_*.deb | head -1)
  fi
  dpkg -x "$DEB" "$CTX/bb"
  mkdir -p "$ROOT/bin" "$ROOT/usr/bin" "$ROOT/usr/local/bin" "$ROOT/usr/lib/vllm-standin" "$ROOT/tmp" "$ROOT/root" "$ROOT/etc"
  chmod 1777 "$ROOT/tmp"
  cp "$CTX/bb/bin/busybox" "$ROOT/bin/busybox"
  for app in $("$ROOT/bin/busybox" --list); do
    [ -e "$ROOT/bin/$app" ] || ln -s busybox "$ROOT/bin/$app"
  done
  cp "$BIN" "$ROOT/usr/lib/vllm-standin/vllm-standin"
  # As a CUDA runtime image (nvidia/cuda:*-base): apt with NVIDIA's repo, no nvcc, no
  # compiler, no ccache. The stand-in plays apt-get: a build template installs them.
  ln -s /usr/lib/vllm-standin/vllm-standin "$ROOT/usr/bin/apt-get"
  mkdir -p "$ROOT/etc/apt/sources.list.d"
  echo "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /" \
    > "$ROOT/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list"
  printf 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\n' > "$ROOT/etc/os-release"
  echo "root:x:0:0:root:/root:/bin/sh" > "$ROOT/etc/passwd"
  echo "root:x:0:" > "$ROOT/etc/group"
  cat > "$CTX/Dockerfile" <<DF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin STANDIN_ECHO_TOKEN=1
LABEL nightshift.standin.role=base nightshift.standin.src=$HASH
WORKDIR /
DF
  quiet docker build -q -t "$NAME:base" "$CTX"
fi
if [ -n "$BASE_ONLY" ]; then exit 0; fi

img() { scripts/standin-image.sh --quiet "$@"; }
img --family official --version 0.8.5 "$NAME:latest" "$NAME:src-$HASH"
img --family official --version 0.8.5 --fail aimv2 "$NAME:aimv2"
img --family official --version 0.8.5 --fail numpy "$NAME:numpy"
img --family official --version 0.8.5 --fail oom "$NAME:oom"
img --family official --version 0.8.5 --fail hang "$NAME:hang"
img --family official --version 0.8.5 --fail crash:2 "$NAME:crash"
img --family official --version 0.6.4 --fail portbug "$NAME:portbug"
# Older source tags, and stand-in images no tag points to any more, only pin stale layers.
for t in $(docker images --format '{{.Tag}}' "$NAME" | grep '^src-' | grep -v "^src-$HASH$" || true); do
  docker rmi "$NAME:$t" >/dev/null 2>&1 || true
done
for t in $(docker images --format '{{.Tag}}' "$NAME" | grep -E '^(k|fam)-' || true); do
  [ "$(label "$NAME:$t" nightshift.standin.src)" = "$HASH" ] || docker rmi "$NAME:$t" >/dev/null 2>&1 || true
done
for id in $(docker images -q -f dangling=true -f label=nightshift.standin.role); do
  docker rmi "$id" >/dev/null 2>&1 || true   # refused while a container still uses it
done
ms=$(( ($(date +%s%N) - T0) / 1000000 ))
echo "built $NAME:{base,latest,aimv2,numpy,oom,hang,crash,portbug} (src-$HASH) in $((ms / 1000)).$((ms % 1000 / 100)) s"
