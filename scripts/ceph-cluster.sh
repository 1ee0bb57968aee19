#!/usr/bin/env bash
# A one-node Ceph cluster for tests and benchmarks, from Debian's packages
# (ceph-mon, ceph-osd, ceph-common; scripts/install-deps.sh installs them).
#
#   scripts/ceph-cluster.sh start DIR   one monitor and one OSD (BlueStore on a
#                                       sparse file, with a cache that holds a
#                                       benchmark's 1 GiB image), 127.0.0.1
#                                       only, auth none, pool size 1, a pool
#                                       named "rbd". Returns once the pool
#                                       takes I/O; the last line printed is
#                                       the path of DIR/ceph.conf.
#   scripts/ceph-cluster.sh stop DIR    stops the daemons by the PIDs that start
#                                       recorded and removes DIR.
#
# Everything lives in DIR: configuration, data, sockets, logs, PID files. The
# monitor's ports are picked free at start, so clusters can run side by side.
# No manager daemon: RBD I/O does not need one (commands it serves, such as
# `ceph pg stat`, would hang). Start-up settings and pitfalls: see
# shared/reference/ceph.md (paxos intervals, aio poll, no fsck, one process
# for the monitor commands).
#
# Environment: CEPH_OSD_SIZE (default 4G) is the sparse BlueStore file's size;
# CEPH_OSD_CACHE (default 3G: 2.3 GiB for data) the OSD's BlueStore cache,
# a bound that costs memory only as data fills it (see [osd] below);
# CEPH_START_TIMEOUT (default 90) bounds each step of start, in seconds.
# Exit status: 0 done, 1 the cluster could not be started or stopped (start
# stops whatever it had started), 2 usage.
set -euo pipefail

# Debian's python3 has the `rados` module (python3-rados); a python3 earlier
# on PATH (pyenv) may not.
PYTHON=/usr/bin/python3
OSD_SIZE=${CEPH_OSD_SIZE:-4G}
OSD_CACHE=${CEPH_OSD_CACHE:-3G}
STEP_TIMEOUT=${CEPH_START_TIMEOUT:-90}
MARKER=pvdisk-ceph-cluster  # written into DIR: stop removes only such a DIR

usage() {
  echo "usage: $0 start DIR | stop DIR" >&2
  exit 2
}

fail() {
  echo "ceph-cluster: $*" >&2
  exit 1
}

# Picks `count` free TCP ports on 127.0.0.1, one per line.
free_ports() {
  "$PYTHON" - "$1" <<'EOF'
import socket, sys
sockets = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    sockets.append(s)
for s in sockets:
    print(s.getsockname()[1])
EOF
}

write_conf() {
  local dir=$1 fsid=$2 v2=$3 v1=$4
  cat >"$dir/ceph.conf" <<EOF
# Written by scripts/ceph-cluster.sh: a throw-away one-node cluster.
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
osd crush chooseleaf type = 0
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
run dir = $dir/run
crash dir = $dir/crash
admin socket = $dir/run/\$cluster-\$name.\$pid.asok
log file = $dir/log/\$name.log
log to syslog = false
err to syslog = false
mon cluster log file = $dir/log/cluster.log
mon cluster log to syslog = false
mon data = $dir/mon/\$name
# The monitor otherwise batches each map change for about a second.
paxos propose interval = 0.01
paxos min wait = 0.001
mon data avail warn = 1
mon data avail crit = 0

[mon]
pid file = $dir/run/\$name.pid

[osd]
pid file = $dir/run/\$name.pid
osd data = $dir/osd\$id
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $OSD_SIZE
# Each device close otherwise waits 250 ms; fsck is slow and pointless here.
bdev aio poll ms = 10
bluestore fsck on mkfs = false
bluestore fsck on mount = false
bluestore fsck on umount = false
osd crush update on start = true
# A fixed BlueStore cache that holds a benchmark's whole image in the OSD's
# memory, so that every read is a copy out of memory, never the machine's
# disk: what a run measures is then the path to the OSD, not which blocks
# the runs before it left in a cache. By default (autotuned, sized for a
# rotational device, which the sparse file is taken for) the data share was
# about 64 MiB: bench/compare's runs on a 1 GiB image found 46-100 % of
# their reads there at rr4k_qd1 (depending on which runs came before) and
# 20-33 % at rr4k_qd32, and every write dropped what it overwrote. The data
# share is what meta, kv and kv_onode leave: 1 - 0.1 - 0.1 - 0.04 = 0.76 of
# the cache, split evenly over the cache shards. A placement group's
# objects all go to one shard (its number modulo the shards), so with the
# default 32 shards the pool's 8 placement groups could fill only a quarter
# of it (583 MiB of a 1 GiB image stayed): one shard per placement group.
# The cache is a bound, not an allocation: a small image costs little
# memory (the OSD's resident memory grows by the data it holds).
osd num cache shards = 8
bluestore cache autotune = false
bluestore cache size = $OSD_CACHE
bluestore cache meta ratio = 0.1
bluestore cache kv ratio = 0.1
# Writes stay in the cache too (by default a write drops the cached blocks
# it overwrites).
bluestore default buffered write = true
EOF
  : >"$dir/keyring"
}

# Runs monitor commands from one process (the ceph CLI costs ~0.5 s a call):
# creates the OSD's id, or (after the OSD started) waits for it to be up,
# creates the pool and proves it takes I/O.
mon_commands() {
  local conf=$1 step=$2 arg=${3:-}
  timeout "$STEP_TIMEOUT" "$PYTHON" - "$conf" "$step" "$arg" <<'EOF'
import json, sys, time
import rados

conf, step, arg = sys.argv[1], sys.argv[2], sys.argv[3]
cluster = rados.Rados(conffile=conf, conf={
    "client_mount_timeout": "30", "rados_mon_op_timeout": "30",
    "rados_osd_op_timeout": "60", "log_file": "", "admin_socket": ""})
cluster.connect(timeout=30)

def command(**cmd):
    ret, out, err = cluster.mon_command(json.dumps(cmd), b"")
    if ret != 0:
        sys.exit(f"ceph-cluster: {cmd['prefix']}: {err} ({ret})")
    return out

if step == "osd-new":
    print(json.loads(command(prefix="osd new", uuid=arg, format="json"))["osdid"])
elif step == "pool":
    while True:
        osds = json.loads(command(prefix="osd dump", format="json"))["osds"]
        if any(o["osd"] == int(arg) and o["up"] == 1 for o in osds):
            break
        time.sleep(0.05)
    command(prefix="osd pool create", pool="rbd", pg_num=8, pgp_num=8)
    command(prefix="osd pool application enable", pool="rbd", app="rbd")
    # Blocks until the pool's placement groups are active: then it takes I/O.
    ioctx = cluster.open_ioctx("rbd")
    ioctx.write_full("ceph-cluster-probe", b"ready")
    if ioctx.read("ceph-cluster-probe") != b"ready":
        sys.exit("ceph-cluster: the pool returned other data than written")
    ioctx.remove_object("ceph-cluster-probe")
    ioctx.close()
cluster.shutdown()
EOF
}

# True while PID runs (a zombie counts as gone: PID 1 here reaps only
# every few seconds).
pid_runs() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null || true)
  [ -n "$state" ] && [ "${state:0:1}" != Z ]
}

# PIDs recorded in DIR/pids that still run.
live_pids() {
  local pid
  [ -f "$1/pids" ] || return 0
  while read -r pid; do
    [ -n "$pid" ] || continue
    if pid_runs "$pid"; then echo "$pid"; fi
  done <"$1/pids"
}

record_pid() {
  local dir=$1 pidfile=$2 pid
  for _ in $(seq 1 200); do
    if [ -s "$pidfile" ]; then
      pid=$(cat "$pidfile")
      echo "$pid" >>"$dir/pids"
      return 0
    fi
    sleep 0.05
  done
  fail "no PID file $pidfile appeared; see the logs in $dir/log"
}

# Stops the daemons in the reverse order of start, each waited for before
# the next: the OSD first, while the monitor still answers the "mark me
# down" it sends as it stops (with the monitor gone it waits
# osd_mon_shutdown_timeout, 5 s, for that answer). Up to 10 s a daemon,
# then SIGKILL.
stop_cluster() {
  local dir=$1 pid pids deadline
  if [ -f "$dir/pids" ]; then
    for pid in $(tac "$dir/pids"); do
      if [ -z "$pid" ] || ! pid_runs "$pid"; then continue; fi
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while pid_runs "$pid" && [ "$SECONDS" -lt "$deadline" ]; do
        sleep 0.05
      done
    done
  fi
  pids=$(live_pids "$dir")
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  fi
  [ -z "$(live_pids "$dir")" ] || fail "daemons $(live_pids "$dir") in $dir did not stop"
}

start() {
  local dir=$1
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    fail "$dir exists and is not empty; give a new or empty folder"
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  echo "$MARKER" >"$dir/marker"
  mkdir -p "$dir/run" "$dir/log" "$dir/crash" "$dir/mon"
  # From here on a failure stops what was started (DIR stays, for its logs).
  trap 'echo "ceph-cluster: start failed; logs in '"$dir"'/log" >&2; stop_cluster "'"$dir"'" || true' ERR

  local ports v2 v1 fsid osd_uuid osd_id conf
  ports=$(free_ports 2)
  v2=$(echo "$ports" | sed -n 1p)
  v1=$(echo "$ports" | sed -n 2p)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  write_conf "$dir" "$fsid" "$v2" "$v1"
  conf=$dir/ceph.conf

  monmaptool --create --fsid "$fsid" \
    --addv a "[v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]" "$dir/monmap" >/dev/null
  timeout "$STEP_TIMEOUT" ceph-mon -c "$conf" --mkfs -i a \
    --monmap "$dir/monmap" >"$dir/log/mkfs-mon.out" 2>&1
  timeout "$STEP_TIMEOUT" ceph-mon -c "$conf" -i a
  record_pid "$dir" "$dir/run/mon.a.pid"

  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  osd_id=$(mon_commands "$conf" osd-new "$osd_uuid")
  mkdir -p "$dir/osd$osd_id"
  timeout "$STEP_TIMEOUT" ceph-osd -c "$conf" -i "$osd_id" --mkfs \
    --osd-uuid "$osd_uuid" >"$dir/log/mkfs-osd.out" 2>&1
  timeout "$STEP_TIMEOUT" ceph-osd -c "$conf" -i "$osd_id" \
    >"$dir/log/start-osd.out" 2>&1
  record_pid "$dir" "$dir/run/osd.$osd_id.pid"
  mon_commands "$conf" pool "$osd_id"
  trap - ERR
  echo "$conf"
}

stop() {
  local dir=$1
  [ -d "$dir" ] || fail "$dir does not exist"
  if [ "$(cat "$dir/marker" 2>/dev/null)" != "$MARKER" ]; then
    fail "$dir was not made by '$0 start'; not touching it"
  fi
  stop_cluster "$dir"
  rm -rf "$dir"
}

[ $# -eq 2 ] || usage
if ! [[ $OSD_CACHE =~ ^[1-9][0-9]*[KMG]?$ ]]; then
  echo "ceph-cluster: CEPH_OSD_CACHE='$OSD_CACHE' is not a size; use bytes" \
    "or a number with K, M or G (e.g. 3G)" >&2
  exit 2
fi
case "$1" in
  start) start "$2" ;;
  stop) stop "$2" ;;
  *) usage ;;
esac
