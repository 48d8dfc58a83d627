#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for CI and the tests that submit jobs with
# sbatch: installs Slurm and munge from apt, writes /etc/slurm/slurm.conf for one node
# (this host, all its CPUs), starts munged, slurmctld and slurmd, and stops them again.
# Made for a throwaway machine or container run as root (no systemd, no cgroups); it
# refuses to touch a slurm.conf it did not write, so it never clobbers a real cluster.
#
#   scripts/setup/slurm-local.sh install   # apt-get slurm-wlm and munge (skipped if present)
#   scripts/setup/slurm-local.sh start     # start the cluster, wait until the node is idle
#   scripts/setup/slurm-local.sh status    # sinfo, or exit 1 if it is not running
#   scripts/setup/slurm-local.sh stop      # stop slurmd and slurmctld (munged stays up)
#
# State, spool, pid and log files live under $HEADLAB_SLURM_DIR (default
# /tmp/headlab-slurm). Daemons are stopped by the pids in their pid files, never by name.
set -euo pipefail

# The first line of the slurm.conf this script writes, which tells it apart from one it did not
# write; it names the script where it stood when the marker was chosen, so that a cluster set
# up before the scripts moved into folders is still recognised.
MARKER="# written by headlab scripts/slurm-local.sh"
CONF=/etc/slurm/slurm.conf
DIR="${HEADLAB_SLURM_DIR:-/tmp/headlab-slurm}"
START_TIMEOUT=30

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { echo "slurm-local: $*"; }
die() {
    echo "slurm-local: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

# ---- install ----------------------------------------------------------------------------

cmd_install() {
    if command -v sbatch >/dev/null 2>&1 && [ -x /usr/sbin/munged ]; then
        say "slurm and munge are already installed"
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "no apt-get here; install slurm-wlm and munge yourself"
    say "installing slurm-wlm munge"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge >/dev/null
}

# ---- pid files --------------------------------------------------------------------------

# The pid in $DIR/<daemon>.pid if that process is alive and is that daemon, else nothing.
live_pid() {
    local name=$1 file="$DIR/$1.pid" pid
    [ -r "$file" ] || return 1
    pid=$(tr -dc 0-9 <"$file")
    [ -n "$pid" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    alive "$pid" || return 1
    echo "$pid"
}

# Whether process $1 exists and is not a zombie waiting to be reaped.
alive() {
    local stat
    stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ "${stat#Z}" = "$stat" ]
}

is_ours() { [ -f "$CONF" ] && grep -qxF "$MARKER" "$CONF"; }

running() { is_ours && live_pid slurmctld >/dev/null && live_pid slurmd >/dev/null; }

# ---- munge ------------------------------------------------------------------------------

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if munge_ok; then return 0; fi
    local key=/etc/munge/munge.key d
    $SUDO mkdir -p /etc/munge
    if [ ! -s "$key" ]; then
        say "creating $key"
        $SUDO dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    fi
    $SUDO chown munge:munge /etc/munge "$key"
    $SUDO chmod 0700 /etc/munge
    $SUDO chmod 0400 "$key"
    for d in /run/munge /var/log/munge /var/lib/munge; do
        $SUDO mkdir -p "$d"
        $SUDO chown munge:munge "$d"
    done
    # --force: munged otherwise refuses over log-file ownership warnings in containers.
    # Those warnings are expected here: show munged's output only if it fails.
    local out
    if ! out=$($SUDO /usr/sbin/munged --force 2>&1); then
        echo "$out" >&2
        die "munged did not start"
    fi
    for _ in $(seq 1 20); do
        if munge_ok; then return 0; fi
        sleep 0.25
    done
    die "munged started but 'munge -n | unmunge' fails; see /var/log/munge/munged.log"
}

# ---- slurm.conf -------------------------------------------------------------------------

write_conf() {
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    # slurmd drains a node that has less memory than RealMemory: stay 5% under the total.
    mem=$(free -m | awk '/^Mem:/ { print int($2 * 0.95) }')
    $SUDO mkdir -p /etc/slurm
    $SUDO tee "$CONF" >/dev/null <<EOF
$MARKER
# (rewritten by each 'start'; files under $DIR)
ClusterName=headlab
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

# ---- start ------------------------------------------------------------------------------

node_state() { timeout 5 sinfo -h -o %T 2>/dev/null | head -n 1; }

show_logs() {
    local f
    for f in "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log"; do
        [ -f "$f" ] || continue
        echo "---- tail of $f" >&2
        tail -n 20 "$f" >&2
    done
}

wait_for_node() {
    local deadline=$((SECONDS + START_TIMEOUT)) state=""
    while [ $SECONDS -lt $deadline ]; do
        state=$(node_state || true)
        case "$state" in
            idle | mixed | allocated) return 0 ;;
        esac
        sleep 1
    done
    show_logs
    # Leave nothing half up, so that the next 'start' tries again from scratch.
    cmd_stop >&2
    die "the node is not up after ${START_TIMEOUT}s (sinfo state: '${state:-no answer}');" \
        "the logs are in $DIR/log"
}

check_dir() {
    case "$DIR" in
        /*) ;;
        *) die "HEADLAB_SLURM_DIR must be an absolute path (got '$DIR')" ;;
    esac
    case "$DIR" in
        *[[:space:]]*) die "HEADLAB_SLURM_DIR must not contain spaces (got '$DIR')" ;;
    esac
}

cmd_start() {
    check_dir
    command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] ||
        die "slurm is not installed; run '$0 install' first"
    if [ -f "$CONF" ] && ! is_ours; then
        die "$CONF exists and was not written by this script; refusing to overwrite it" \
            "(a real cluster's config?). Move it away to use the local cluster."
    fi
    if running; then
        wait_for_node
        say "already running (state: $(node_state))"
        return 0
    fi
    # Half a cluster (one daemon died): stop what is left and start both afresh.
    cmd_stop
    $SUDO mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
    start_munge
    write_conf
    $SUDO /usr/sbin/slurmctld -i
    $SUDO /usr/sbin/slurmd
    wait_for_node
    say "running: $(hostname -s), $(nproc) CPUs, partition debug (files in $DIR)"
}

# ---- stop -------------------------------------------------------------------------------

stop_daemon() {
    local name=$1 pid
    if ! pid=$(live_pid "$name"); then
        $SUDO rm -f "$DIR/$name.pid"
        return 0
    fi
    $SUDO kill -TERM "$pid"
    for _ in $(seq 1 60); do
        alive "$pid" || break
        sleep 0.25
    done
    if alive "$pid"; then
        say "$name ($pid) did not stop on TERM; killing it"
        $SUDO kill -KILL "$pid" 2>/dev/null || true
    fi
    $SUDO rm -f "$DIR/$name.pid"
    say "stopped $name ($pid)"
}

cmd_stop() {
    stop_daemon slurmd
    stop_daemon slurmctld
}

# ---- status -----------------------------------------------------------------------------

cmd_status() {
    if ! running; then
        echo "slurm-local: not running" >&2
        exit 1
    fi
    timeout 5 sinfo
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    -h | --help | help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
esac
