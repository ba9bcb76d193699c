#!/usr/bin/env bash
# A single-host Slurm for the Slurm runtime's tests (tests/slurm.rs): Debian's munge and
# slurm-wlm, this host as controller and node, 8 GPUs declared as a gres count backed by
# empty device files (no GPU needed: jobs get CUDA_VISIBLE_DEVICES, nothing else).
#
# Idempotent: installs what is missing, rewrites the config only when it changed, starts
# munged, slurmctld and slurmd when they are not running, and waits for the node to be
# idle. Root only (it writes /etc/slurm and starts daemons).
#
#   scripts/slurm-up.sh          set up and start
#   scripts/slurm-up.sh --check  exit 0 when sbatch works here, 1 otherwise (no changes)
set -euo pipefail

if [ "${1:-}" = "--check" ]; then
  command -v sbatch >/dev/null && sinfo -h -o '%T' 2>/dev/null | grep -Eq 'idle|mixed|alloc' && exit 0
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: scripts/slurm-up.sh writes /etc/slurm and starts daemons: run it as root" >&2
  exit 2
fi

need=()
command -v munged >/dev/null || need+=(munge)
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
CONF=/etc/slurm
DEV=$CONF/fake-gpus
STATE=/var/lib/nightshift-slurm
mkdir -p "$CONF" "$DEV" "$STATE/ctld" "$STATE/d" /var/log/slurm /run/munge /var/lib/munge /var/log/munge
for i in 0 1 2 3 4 5 6 7; do : > "$DEV/nvidia$i"; done

CONF_TEXT="# Written by nightshift's scripts/slurm-up.sh (single-host test cluster).
ClusterName=nightshift
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
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
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
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
NodeName=$HOST CPUs=$(nproc) RealMemory=1000 Gres=gpu:8 State=UNKNOWN
PartitionName=gpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
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
  for p in /run/slurmd.pid /run/slurmctld.pid; do
    if running $p; then kill "$(cat $p)"; fi
  done
  sleep 1
fi
running /run/slurmctld.pid || slurmctld
running /run/slurmd.pid || slurmd

for _ in $(seq 1 60); do
  st=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null || true)
  case "$st" in
    idle*|mixed*|alloc*) echo "slurm up: node $HOST $st, gres gpu:8, partition gpu"; exit 0 ;;
    down*|drain*|inval*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
echo "error: the Slurm node did not become idle (state: ${st:-none}); see /var/log/slurm/" >&2
exit 1
