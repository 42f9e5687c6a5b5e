#!/usr/bin/env bash
# A three-node MariaDB Galera cluster behind HAProxy on this machine, for the HA test lane and
# for trying MQ Center's failover by hand. The machine's own MariaDB (3306) is never touched:
# each node has its own data directory under $MQ_GALERA_DIR and its own ports.
#
# Usage: ./scripts/galera.sh start|stop|status|kill-node N|restart-node N|stop-node N|url|destroy
#
#   start            install galera-4/haproxy if missing, create the data directories on first
#                    use, bootstrap node 1 (--wsrep-new-cluster), join nodes 2 and 3, start HAProxy
#   stop             stop HAProxy and the nodes (data kept; the next start bootstraps the node
#                    that saw the last commit)
#   status           each node's wsrep state, cluster size, and which node HAProxy writes to
#   kill-node N      SIGKILL node N (a crash: no shutdown, no goodbye to the cluster)
#   stop-node N      SIGTERM node N (a clean leave)
#   restart-node N   start node N again; it rejoins by IST (or SST) and waits until Synced
#   writer           the node HAProxy sends connections to now (node1, node2, node3 or none)
#   url              the DATABASE_URL prefix through HAProxy (mysql://root@127.0.0.1:4300)
#   destroy          stop everything and delete $MQ_GALERA_DIR
#
# Topology (docs/deployment.md): clients connect to HAProxy only. HAProxy sends every
# connection to ONE node (the writer, node 1 first); the others are `backup` servers used when
# the writer fails its health check. When node 1 is healthy again it takes the writes back,
# and HAProxy closes the backup's connections at that moment, so there is never a second
# writer while old connections drain. The health check is per node and asks the node itself
# whether it is Synced (wsrep_local_state = 4, wsrep_ready = ON), so a node that is up but
# joining, donating, or cut off from the primary component takes no traffic.
#
# Environment: MQ_GALERA_DIR (default /var/tmp/mq-galera), MQ_GALERA_PORT (first node's SQL
# port, default 4306; nodes use 4306, 4307, 4308), MQ_HAPROXY_PORT (default 4300),
# MQ_GALERA_GCOMM_PORT (default 4567; node N uses 4567+10*(N-1), IST +1, SST 4444+10*(N-1)).
set -euo pipefail

DIR=${MQ_GALERA_DIR:-/var/tmp/mq-galera}
SQL_PORT=${MQ_GALERA_PORT:-4306}
HAPROXY_PORT=${MQ_HAPROXY_PORT:-4300}
GCOMM_PORT=${MQ_GALERA_GCOMM_PORT:-4567}
SST_PORT=${MQ_GALERA_SST_PORT:-4444}
PROVIDER=/usr/lib/galera/libgalera_smm.so
NODES=(1 2 3)
# Nodes run as mysql when started by root (the rsync state transfer's daemon must be able to
# write the joiner's data directory), as the caller otherwise.
if [ "$(id -u)" = 0 ]; then RUN_AS=mysql; else RUN_AS=$(id -un); fi

say() { printf '== %s\n' "$*"; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

port_of() { echo $((SQL_PORT + $1 - 1)); }
gcomm_of() { echo $((GCOMM_PORT + 10 * ($1 - 1))); }
sst_of() { echo $((SST_PORT + 10 * ($1 - 1))); }
pid_of() { cat "$DIR/node$1/node.pid" 2>/dev/null || true; }
alive() { local pid; pid=$(pid_of "$1"); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
sqlq() { mysql -h127.0.0.1 -P"$(port_of "$1")" -uroot --connect-timeout=2 -N -B -e "$2" 2>/dev/null; }
wsrep() { sqlq "$1" "SHOW GLOBAL STATUS LIKE '$2'" | cut -f2; }

packages() {
  local missing=()
  [ -f "$PROVIDER" ] || missing+=(galera-4)
  command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
  command -v rsync >/dev/null || missing+=(rsync)  # state transfers (wsrep_sst_method=rsync)
  command -v lsof >/dev/null || missing+=(lsof)    # used by wsrep_sst_rsync
  [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
      || die "could not install ${missing[*]} with apt-get"
  fi
  # Debian's haproxy package starts its own service with its own configuration: ours is
  # separate and leaves it alone.
}

cluster_address() {
  local list=() n
  for n in "${NODES[@]}"; do list+=("127.0.0.1:$(gcomm_of "$n")"); done
  local IFS=,; echo "gcomm://${list[*]}"
}

# The wsrep and InnoDB settings of every node (documented in docs/deployment.md).
node_config() {
  local n=$1 gport; gport=$(gcomm_of "$n")
  cat <<EOF
[mariadbd]
datadir=$DIR/node$n/data
socket=$DIR/node$n/mysqld.sock
pid-file=$DIR/node$n/mariadbd.pid
log-error=$DIR/node$n/error.log
port=$(port_of "$n")
bind-address=127.0.0.1
user=$RUN_AS
skip-name-resolve
max_connections=500
# Small nodes: three of them share a 2-core test machine with everything else.
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
performance_schema=OFF
# Durability comes from the cluster (a commit is certified on every node before it is
# acknowledged); each node flushes its redo log once a second.
innodb_flush_log_at_trx_commit=2
# Galera requirements: row-based replication, InnoDB, interleaved auto-increment locks.
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
character_set_server=utf8mb4
collation_server=utf8mb4_bin

wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=mqcenter
wsrep_cluster_address=$(cluster_address)
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$gport
wsrep_node_incoming_address=127.0.0.1:$(port_of "$n")
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(sst_of "$n")
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$gport;ist.recv_addr=127.0.0.1:$((gport + 1));gcache.size=128M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S"
wsrep_slave_threads=2
# 0: reads do not wait for the node to apply what other nodes committed. MQ Center writes
# through one node (HAProxy's single writer), which always sees its own commits; a reader on
# another node (DATABASE_READ_URL) sets it per session where it must (docs/deployment.md).
wsrep_sync_wait=0
# Galera gives every node its own auto-increment offset: ids are unique but not consecutive.
wsrep_auto_increment_control=ON
EOF
}

init_node() {
  local n=$1
  [ -d "$DIR/node$n/data/mysql" ] && return 0
  mkdir -p "$DIR/node$n"
  node_config "$n" > "$DIR/node$n/my.cnf"
  [ "$RUN_AS" = "$(id -un)" ] || chown -R "$RUN_AS" "$DIR/node$n"
  mariadb-install-db --defaults-file="$DIR/node$n/my.cnf" --auth-root-authentication-method=normal \
    --skip-test-db >"$DIR/node$n/install.log" 2>&1 || die "mariadb-install-db failed for node $n: $DIR/node$n/install.log"
}

start_node() {
  local n=$1 bootstrap=${2:-}
  alive "$n" && { echo "node $n already running (pid $(pid_of "$n"))"; return 0; }
  init_node "$n"
  node_config "$n" > "$DIR/node$n/my.cnf"
  local args=(--defaults-file="$DIR/node$n/my.cnf")
  if [ -n "$bootstrap" ]; then
    args+=(--wsrep-new-cluster)
    # A node bootstraps only when it is safe to (it had the last commit): this one is chosen.
    [ -f "$DIR/node$n/data/grastate.dat" ] && sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$DIR/node$n/data/grastate.dat"
  fi
  # After a crash (SIGKILL) the saved state has no position: recover it from InnoDB, as
  # Debian's galera_recovery does for systemd, so the node rejoins by IST from another node's
  # gcache instead of copying the whole data directory (SST, which blocks its donor).
  if [ -z "$bootstrap" ] && grep -q '^seqno: *-1' "$DIR/node$n/data/grastate.dat" 2>/dev/null; then
    # The recovery run is stopped once it has printed the position: MariaDB 10.11.19 then
    # fails to open tables with indexed virtual columns (mq_message's, messages migration
    # 0011) in this mode, retrying without end while its memory grows to the whole machine's.
    # Killing it is one more crash: the node's own start recovers InnoDB as always.
    local position recovering
    rm -f "$DIR/node$n/recover.log"  # the node's user writes a new one
    /usr/sbin/mariadbd "${args[@]}" --wsrep-recover --log-error="$DIR/node$n/recover.log" >/dev/null 2>&1 &
    recovering=$!
    for _ in $(seq 1 240); do
      grep -aq 'WSREP: Recovered position:' "$DIR/node$n/recover.log" 2>/dev/null && break
      kill -0 "$recovering" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$recovering" 2>/dev/null || true
    wait "$recovering" 2>/dev/null || true
    position=$(grep -a 'WSREP: Recovered position:' "$DIR/node$n/recover.log" 2>/dev/null | tail -1 |
               sed 's/.*Recovered position: *//' || true)
    [ -n "$position" ] && args+=(--wsrep-start-position="$position") && echo "node $n recovered position $position"
  fi
  # setsid: the node is not in the caller's process group (a test's Ctrl-C does not kill it).
  # Its pid is known at once (mariadbd writes its own pid file only after a state transfer).
  setsid /usr/sbin/mariadbd "${args[@]}" </dev/null >>"$DIR/node$n/stdout.log" 2>&1 &
  echo $! > "$DIR/node$n/node.pid"
  wait_synced "$n" 180
}

wait_synced() {
  local n=$1 limit=$2 start=$SECONDS
  while [ $((SECONDS - start)) -lt "$limit" ]; do
    if [ "$(wsrep "$n" wsrep_local_state)" = 4 ] && [ "$(wsrep "$n" wsrep_ready)" = ON ]; then
      echo "node $n Synced (port $(port_of "$n"), $((SECONDS - start))s)"; return 0
    fi
    alive "$n" || { tail -20 "$DIR/node$n/error.log" >&2; die "node $n exited"; }
    sleep 0.5
  done
  tail -20 "$DIR/node$n/error.log" >&2
  die "node $n not Synced within ${limit}s"
}

stop_node() {
  local n=$1 sig=${2:-TERM} pid
  pid=$(pid_of "$n")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { echo "node $n not running"; return 0; }
  kill -s "$sig" "$pid"
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo "node $n did not stop: killed"; }
  echo "node $n stopped ($sig)"
}

# HAProxy's per-node health check: Synced and ready, asked of the node itself.
write_check() {
  cat > "$DIR/check-node.sh" <<'EOF'
#!/bin/sh
# HAProxy external check: $3 = node address, $4 = node port. Up only when Synced and ready.
state=$(mysql -h"$3" -P"$4" -uroot --connect-timeout=1 -N -B -e \
  "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME) FROM information_schema.GLOBAL_STATUS
   WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE', 'WSREP_READY')" 2>/dev/null)
[ "$state" = "4,ON" ]
EOF
  chmod +x "$DIR/check-node.sh"
}

haproxy_config() {
  cat <<EOF
global
  daemon
  pidfile $DIR/haproxy.pid
  maxconn 2000
  external-check
  insecure-fork-wanted

defaults
  mode tcp
  timeout connect 2s
  # Long-polls hold a connection idle for at most a pull's wait (20 s); brokers keep
  # connections for DB_CONN_MAX_AGE (300 s) and reconnect when HAProxy closes an idle one.
  timeout client 1h
  timeout server 1h
  retries 2
  option redispatch

listen mqcenter-galera
  bind 127.0.0.1:$HAPROXY_PORT
  # One writer: node 1 while it is healthy, else the first healthy backup.
  balance first
  option external-check
  external-check path "/usr/bin:/bin"
  external-check command $DIR/check-node.sh
  # A check that does not answer within 2 s (a busy machine) counts as failed; two failures
  # in a row take the node out, two successes bring it back. A failed node's connections are
  # closed at once (brokers see an error, not a hang); when node 1 is back, the backup's
  # connections are closed too, so two nodes never take writes at once.
  timeout check 2s
  default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions
EOF
  local n role=""
  for n in "${NODES[@]}"; do
    echo "  server node$n 127.0.0.1:$(port_of "$n") check $role"
    role=backup
  done
  cat <<EOF

listen stats
  mode http
  bind 127.0.0.1:$((HAPROXY_PORT + 1))
  stats enable
  stats uri /
  stats show-legends
EOF
}

haproxy_alive() { local pid; pid=$(cat "$DIR/haproxy.pid" 2>/dev/null || true); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

start_haproxy() {
  haproxy_alive && { echo "HAProxy already running"; return 0; }
  write_check
  haproxy_config > "$DIR/haproxy.cfg"
  haproxy -c -q -f "$DIR/haproxy.cfg" || die "invalid HAProxy configuration $DIR/haproxy.cfg"
  setsid haproxy -f "$DIR/haproxy.cfg" </dev/null >>"$DIR/haproxy.log" 2>&1
  for _ in $(seq 1 40); do
    [ "$(writer)" != "" ] && [ "$(writer)" != none ] && { echo "HAProxy on 127.0.0.1:$HAPROXY_PORT writes to $(writer)"; return 0; }
    sleep 0.25
  done
  die "HAProxy on $HAPROXY_PORT has no healthy node"
}

stop_haproxy() {
  local pid; pid=$(cat "$DIR/haproxy.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    echo "HAProxy stopped"
  fi
  rm -f "$DIR/haproxy.pid"
}

# Each node HAProxy sees, as "name:status" (UP, DOWN, ...), from its stats CSV.
backend_states() {
  curl -s --max-time 2 "http://127.0.0.1:$((HAPROXY_PORT + 1))/;csv" 2>/dev/null \
    | awk -F, '$1 == "mqcenter-galera" && $2 ~ /^node/ {print $2 ":" $18}'
}

# The node that takes writes: the node a connection through HAProxy lands on.
writer() {
  local name
  name=$(mysql -h127.0.0.1 -P"$HAPROXY_PORT" -uroot --connect-timeout=2 -N -B \
    -e "SELECT @@wsrep_node_name" 2>/dev/null) || true
  echo "${name:-none}"
}

status() {
  local n
  for n in "${NODES[@]}"; do
    if alive "$n"; then
      printf 'node%s port %s pid %s state %s (%s) ready %s cluster_size %s\n' "$n" "$(port_of "$n")" "$(pid_of "$n")" \
        "$(wsrep "$n" wsrep_local_state)" "$(wsrep "$n" wsrep_local_state_comment)" "$(wsrep "$n" wsrep_ready)" \
        "$(wsrep "$n" wsrep_cluster_size)"
    else
      printf 'node%s port %s down\n' "$n" "$(port_of "$n")"
    fi
  done
  if haproxy_alive; then
    echo "haproxy 127.0.0.1:$HAPROXY_PORT $(backend_states | tr '\n' ' ')writer $(writer)"
  else
    echo "haproxy down"
  fi
}

node_arg() { case "${1:-}" in 1|2|3) echo "$1" ;; *) die "name a node: 1, 2 or 3" ;; esac; }

case "${1:-}" in
  start)
    packages
    mkdir -p "$DIR"
    # The others join the first running node. With none running, the node that saw the last
    # commit bootstraps (the highest seqno a clean stop saved; node 1 on first use), so no
    # commit is lost to an older copy.
    first=""
    for n in "${NODES[@]}"; do alive "$n" && first=$n && break; done
    if [ -z "$first" ]; then
      first=1 best=-1
      for n in "${NODES[@]}"; do
        seqno=$(sed -n 's/^seqno: *//p' "$DIR/node$n/data/grastate.dat" 2>/dev/null || true)
        if [ -n "$seqno" ] && [ "$seqno" -gt "$best" ]; then best=$seqno first=$n; fi
      done
      say "bootstrapping node $first"; start_node "$first" bootstrap
    fi
    for n in "${NODES[@]}"; do [ "$n" = "$first" ] || { say "joining node $n"; start_node "$n"; }; done
    say "HAProxy"; start_haproxy
    status
    ;;
  stop)
    stop_haproxy
    for n in 3 2 1; do stop_node "$n"; done
    ;;
  status) status ;;
  kill-node) n=$(node_arg "${2:-}"); stop_node "$n" KILL ;;
  stop-node) n=$(node_arg "${2:-}"); stop_node "$n" TERM ;;
  restart-node) n=$(node_arg "${2:-}"); start_node "$n" ;;
  writer) writer ;;
  url) echo "mysql://root@127.0.0.1:$HAPROXY_PORT" ;;
  destroy)
    stop_haproxy
    for n in 3 2 1; do stop_node "$n" KILL; done
    rm -rf "$DIR"
    ;;
  *) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
