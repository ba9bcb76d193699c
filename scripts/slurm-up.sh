#!/usr/bin/env bash
# A Slurm on this machine for the Slurm runtime's tests (tests/slurm.rs): Debian's munge
# and slurm-wlm, this host as controller and node `HOST`, and a second node `n2` whose slurmd
# lives in its own network namespace (ns-slurm-n2, 10.232.0.2 over a veth pair), each with
# 8 GPUs declared as a gres count backed by empty device files (no GPU needed).
#
# Idempotent: installs what is missing, rewrites the config only when it changed, starts
# munged, slurmctld and slurmd when they are not running, and waits for the node to be
# idle. Root only (it writes /etc/slurm and starts daemons).
#
#   scripts/slurm-up.sh          set up and start
#   scripts/slurm-up.sh --check  exit 0 when sbatch works here, 1 otherwise (no changes)
set -euo pipefail

if [ "${1:-}" = "--check" ]; then
  # Every node the config names is up.
  command -v sbatch >/dev/null || exit 1
  states=$(sinfo -h -N -o '%T' 2>/dev/null) || exit 1
  [ -n "$states" ] && ! echo "$states" | grep -Evq 'idle|mixed|alloc|comp' && exit 0
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: scripts/slurm-up.sh writes /etc/slurm and starts daemons: run it as root" >&2
  exit 2
fi

need=()
command -v munged >/dev/null || need+=(munge)
command -v slurmrestd >/dev/null || need+=(slurmrestd)
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
if [ ${#need[@]} -gt 0 ]; then
  # Debian's packages try to start their services; there is no systemd here, and the
  # daemons are started below with this config anyway.
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "${need[@]}"; }
fi

HOST=$(hostname -s)
NS=ns-slurm-n2
# The second node's network: its own namespace, reached over a veth pair. Where namespaces
# cannot be made (a container without CAP_NET_ADMIN), the cluster is this host alone.
netns() {
  ip netns list 2>/dev/null | grep -qw "$NS" || ip netns add "$NS" || return 1
  if ! ip link show veth-sl0 >/dev/null 2>&1; then
    ip link add veth-sl0 type veth peer name veth-sl1 &&
      ip link set veth-sl1 netns "$NS" &&
      ip addr add 10.232.0.1/24 dev veth-sl0 &&
      ip netns exec "$NS" ip addr add 10.232.0.2/24 dev veth-sl1 || return 1
  fi
  ip link set veth-sl0 up && ip netns exec "$NS" ip link set lo up &&
    ip netns exec "$NS" ip link set veth-sl1 up
}
if netns 2>/dev/null; then
  NODES="$HOST n2"
  CTLD="$HOST(10.232.0.1)"
  ADDR=" NodeAddr=10.232.0.1"
else
  echo "warning: no network namespace for a second node: a one-node cluster" >&2
  NODES="$HOST"
  CTLD="$HOST"
  ADDR=
fi
CONF=/etc/slurm
DEV=$CONF/fake-gpus
STATE=/var/lib/nightshift-slurm
mkdir -p "$CONF" "$DEV" "$STATE/ctld" "$STATE/d/$HOST" "$STATE/d/n2" /var/log/slurm /run/munge /var/lib/munge /var/log/munge
for i in 0 1 2 3 4 5 6 7; do : > "$DEV/nvidia$i"; done

CONF_TEXT="# Written by nightshift's scripts/slurm-up.sh (single-host test cluster).
ClusterName=nightshift
SlurmctldHost=$CTLD
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# slurmrestd's callers authenticate with JWTs (scontrol token); daemons keep munge.
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$CONF/jwt_hs256.key
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# Quick turnaround for tests: a finished job stays visible to scontrol for 5 minutes.
MinJobAge=300
SchedulerParameters=sched_interval=2
KillWait=5
InactiveLimit=0
NodeName=$HOST$ADDR CPUs=$(nproc) RealMemory=1000 Gres=gpu:8 State=UNKNOWN
$( [ "$NODES" = "$HOST" ] || echo "NodeName=n2 NodeAddr=10.232.0.2 NodeHostname=$HOST CPUs=$(nproc) RealMemory=1000 Gres=gpu:8 State=UNKNOWN")
PartitionName=gpu Nodes=${NODES// /,} Default=YES MaxTime=INFINITE State=UP
"
GRES_TEXT="AutoDetect=off
Name=gpu File=$DEV/nvidia[0-7]
"
changed=
if [ "$(cat $CONF/slurm.conf 2>/dev/null)" != "$(printf '%s' "$CONF_TEXT")" ]; then
  printf '%s' "$CONF_TEXT" > $CONF/slurm.conf; changed=1
fi
if [ "$(cat $CONF/gres.conf 2>/dev/null)" != "$(printf '%s' "$GRES_TEXT")" ]; then
  printf '%s' "$GRES_TEXT" > $CONF/gres.conf; changed=1
fi

if [ ! -s "$CONF/jwt_hs256.key" ]; then
  dd if=/dev/urandom bs=32 count=1 of="$CONF/jwt_hs256.key" 2>/dev/null
  chmod 600 "$CONF/jwt_hs256.key"
fi
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chmod 400 /etc/munge/munge.key
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! munge -n >/dev/null 2>&1; then
  munged --force
fi
if [ -n "$changed" ]; then
  # A new config: restart whatever runs with the old one.
  for p in /run/slurmd.pid /run/slurmd-*.pid /run/slurmctld.pid; do
    if running "$p"; then kill "$(cat "$p")"; fi
  done
  sleep 1
fi
running /run/slurmctld.pid || slurmctld
running "/run/slurmd-$HOST.pid" || slurmd -N "$HOST"
# nsenter, not `ip netns exec`: that remounts /sys, and slurmd needs the cgroup fs.
if [ "$NODES" != "$HOST" ]; then
  running /run/slurmd-n2.pid || nsenter --net="/run/netns/$NS" slurmd -N n2
fi

# slurmrestd on 127.0.0.1:6820 (JWT auth; it refuses to run as root, so as nobody; only the
# v0.0.38 API: the accounting ones need slurmdbd).
RESTD_PID=/run/nightshift-slurmrestd.pid
if command -v slurmrestd >/dev/null && ! running $RESTD_PID; then
  SLURM_JWT=daemon nohup slurmrestd -u nobody -g nogroup -a rest_auth/jwt -s openapi/v0.0.38 127.0.0.1:6820 \
    >/var/log/slurm/slurmrestd.log 2>&1 &
  echo $! > $RESTD_PID
fi
up() { case "$1" in idle*|mixed*|alloc*|comp*) return 0 ;; *) return 1 ;; esac; }
for _ in $(seq 1 60); do
  ok=1
  for n in $NODES; do
    st=$(sinfo -h -N -n "$n" -o '%T' 2>/dev/null | head -n 1 || true)
    case "$st" in
      down*|drain*|inval*) scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true ;;
    esac
    up "$st" || ok=
  done
  if [ -n "$ok" ]; then echo "slurm up: nodes $NODES, gres gpu:8 each, partition gpu"; exit 0; fi
  sleep 1
done
echo "error: the Slurm nodes did not become idle ($(sinfo -h -N -o '%N %T' | tr '\n' ' ')); see /var/log/slurm/" >&2
exit 1
