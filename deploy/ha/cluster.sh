#!/usr/bin/env bash
# A local three-node PostgreSQL cluster the way it is run in production (#34): Patroni on each
# node, etcd as its store, HAProxy in front sending connections to the leader only (Patroni's
# REST check `GET /primary`), synchronous replication (a commit is acknowledged once a replica
# has it; only that replica may be promoted). Everything on 127.0.0.1, under .data/ha/.
#   cluster.sh up | down | status | leader | wait-healthy
# Ports: HAProxy HA_PORT (25430), PostgreSQL 25431-25433, Patroni REST 28431-28433, etcd 22379-22380:
# below the kernel's ephemeral range (32768-60999), where an outgoing connection's local port
# could hold one of them when the cluster starts (a CI run's HAProxy once found 55430 taken).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HA=$ROOT/.data/ha
PGBIN=/usr/lib/postgresql/15/bin
HA_PORT=${HA_PORT:-25430}
ETCD_PORT=${HA_ETCD_PORT:-22379}
NODES=(1 2 3)
SUPERUSER_PASSWORD=${HA_SUPERUSER_PASSWORD:-ha-local-superuser}
REPLICATION_PASSWORD=${HA_REPLICATION_PASSWORD:-ha-local-replication}
log() { printf '==> %s\n' "$*" >&2; }

deps() {
  local missing=()
  for p in postgresql-15 postgresql-15-postgis-3 patroni etcd-server haproxy python3-etcd pgbackrest; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

pg_port() { echo $((25430 + $1)); }
rest_port() { echo $((28430 + $1)); }

# ttl 12 s, loop 2 s, retry 5 s (loop_wait + 2 x retry_timeout <= ttl): a dead leader's key
# expires within 12 s and a replica takes over. synchronous_mode_strict: with no replica in sync
# the leader refuses to acknowledge commits rather than acknowledge what a failover could lose.
node_config() { # $1 = node number
  local n=$1
  cat <<YML
scope: app-backend
name: pg$n
log:
  level: WARNING
  dir: $HA/log/pg$n
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 12
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        shared_buffers: 128MB
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        archive_mode: "on"
        archive_command: /bin/true
  initdb:
    - encoding: UTF8
    - data-checksums
    - auth-local: trust
    - auth-host: scram-sha-256
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $HA/pg$n
  bin_dir: $PGBIN
  pgpass: $HA/pgpass$n
  authentication:
    superuser:
      username: postgres
      password: $SUPERUSER_PASSWORD
    replication:
      username: replicator
      password: $REPLICATION_PASSWORD
    rewind:
      username: postgres
      password: $SUPERUSER_PASSWORD
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
  parameters:
    unix_socket_directories: $HA/sock
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
YML
}

haproxy_config() {
  cat <<CFG
global
    # Two descriptors per connection: 400 fits the 1,024 descriptors a container may be capped
    # at (HAProxy refuses to start when it cannot raise its limit to what maxconn needs).
    maxconn 400
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
# The leader only: Patroni answers 200 on /primary on the node that holds the leader key and
# runs as primary; every other node answers 503. A node marked down has its sessions cut, so
# the services' pools reconnect to the new leader instead of waiting on a dead socket.
listen primary
    bind 127.0.0.1:$HA_PORT
    option httpchk
    http-check send meth GET uri /primary
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
CFG
  for n in "${NODES[@]}"; do
    echo "    server pg$n 127.0.0.1:$(pg_port "$n") maxconn 300 check port $(rest_port "$n")"
  done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  deps
  mkdir -p "$HA/run" "$HA/sock" "$HA/etcd"
  for n in "${NODES[@]}"; do mkdir -p "$HA/log/pg$n"; done
  chown -R postgres:postgres "$HA"
  if ! alive "$HA/run/etcd.pid"; then
    log "etcd on 127.0.0.1:$ETCD_PORT"
    setpriv --reuid=postgres --regid=postgres --init-groups etcd --name ha-etcd --data-dir "$HA/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "ha-etcd=http://127.0.0.1:$((ETCD_PORT + 1))" </dev/null >>"$HA/etcd.log" 2>&1 &
    echo $! > "$HA/run/etcd.pid"
    # A restart after kill -9 replays etcd's WAL first: give it 30 s, and say why when it fails.
    local ready=0
    for _ in $(seq 1 300); do
      if curl -fsS -o /dev/null "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null; then ready=1; break; fi
      alive "$HA/run/etcd.pid" || break
      sleep 0.1
    done
    if [ $ready = 0 ]; then log "etcd did not become healthy:"; tail -20 "$HA/etcd.log" >&2; return 1; fi
  fi
  for n in "${NODES[@]}"; do start_node "$n"; done
  if ! alive "$HA/run/haproxy.pid"; then
    haproxy_config > "$HA/haproxy.cfg"
    log "HAProxy on 127.0.0.1:$HA_PORT (to the leader)"
    if ! haproxy -f "$HA/haproxy.cfg" -D -p "$HA/run/haproxy.pid" >>"$HA/haproxy.log" 2>&1; then
      log "HAProxy did not start:"; tail -5 "$HA/haproxy.log" >&2; return 1
    fi
  fi
  wait_healthy 120
}

start_node() { # $1 = node number
  local n=$1
  alive "$HA/run/patroni$n.pid" && return 0
  node_config "$n" > "$HA/pg$n.yml"
  chown postgres:postgres "$HA/pg$n.yml"
  log "Patroni pg$n (PostgreSQL on 127.0.0.1:$(pg_port "$n"))"
  setpriv --reuid=postgres --regid=postgres --init-groups patroni "$HA/pg$n.yml" </dev/null >>"$HA/log/patroni$n.out" 2>&1 &
  echo $! > "$HA/run/patroni$n.pid"
}

# Kill -9 a node as if its machine died: Patroni and every PostgreSQL process of it.
kill_node() { # $1 = node number
  local n=$1
  [ -f "$HA/run/patroni$n.pid" ] && kill -9 "$(cat "$HA/run/patroni$n.pid")" 2>/dev/null || true
  if [ -f "$HA/pg$n/postmaster.pid" ]; then
    local pm; pm=$(head -1 "$HA/pg$n/postmaster.pid")
    pkill -9 -P "$pm" 2>/dev/null || true
    kill -9 "$pm" 2>/dev/null || true
  fi
  rm -f "$HA/run/patroni$n.pid"
}

members() { curl -fsS "http://127.0.0.1:$(rest_port "${1:-1}")/cluster" 2>/dev/null || true; }

# The cluster as Patroni sees it (asked of any live node).
cluster_json() {
  for n in "${NODES[@]}"; do
    local out; out=$(members "$n")
    if [ -n "$out" ]; then echo "$out"; return 0; fi
  done
  return 1
}

leader() { cluster_json | python3 -c 'import json,sys; m=[x["name"] for x in json.load(sys.stdin)["members"] if x["role"]=="leader" and x["state"]=="running"]; print(m[0][2:] if m else "")'; }

# Healthy: a running leader and a synchronous standby streaming from it, and HAProxy reaching it.
wait_healthy() { # $1 = seconds
  local deadline=$(( $(date +%s) + ${1:-60} ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    local ok
    ok=$(cluster_json 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)["members"]
print(int(any(x["role"] == "leader" and x["state"] == "running" for x in m)
          and any(x["role"] == "sync_standby" and x["state"] in ("running", "streaming") for x in m)))' 2>/dev/null || echo 0)
    if [ "$ok" = 1 ] && PGPASSWORD=$SUPERUSER_PASSWORD psql -X -tA -h 127.0.0.1 -p "$HA_PORT" -U postgres -d postgres -c "SELECT 1" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  log "the cluster is not healthy:"; cluster_json >&2 || true
  for n in "${NODES[@]}"; do
    log "pg$n (Patroni, then PostgreSQL):"
    tail -8 "$HA/log/patroni$n.out" >&2 2>/dev/null || true
    tail -8 "$HA/log/pg$n/patroni.log" >&2 2>/dev/null || true
    tail -5 "$(ls -t "$HA/pg$n"/log/*.log 2>/dev/null | head -1)" >&2 2>/dev/null || true
  done
  return 1
}

down() {
  [ -f "$HA/run/haproxy.pid" ] && kill "$(cat "$HA/run/haproxy.pid")" 2>/dev/null || true
  for n in "${NODES[@]}"; do
    if alive "$HA/run/patroni$n.pid"; then kill "$(cat "$HA/run/patroni$n.pid")" 2>/dev/null || true; fi
  done
  for _ in $(seq 1 100); do
    local any=0
    for n in "${NODES[@]}"; do alive "$HA/run/patroni$n.pid" && any=1; done
    [ $any = 0 ] && break; sleep 0.2
  done
  for n in "${NODES[@]}"; do kill_node "$n"; done
  [ -f "$HA/run/etcd.pid" ] && kill "$(cat "$HA/run/etcd.pid")" 2>/dev/null || true
  rm -f "$HA"/run/*.pid
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  destroy) down; rm -rf "$HA" ;;
  status) cluster_json | python3 -m json.tool ;;
  leader) leader ;;
  wait-healthy) wait_healthy "${2:-60}" ;;
  kill-node) kill_node "$2" ;;
  start-node) start_node "$2" ;;
  stop-etcd) [ -f "$HA/run/etcd.pid" ] && kill -9 "$(cat "$HA/run/etcd.pid")" 2>/dev/null; rm -f "$HA/run/etcd.pid" ;;
  start-etcd) up ;;  # the nodes and HAProxy are running: up starts etcd and waits for health
  *) echo "usage: $0 up|down|destroy|status|leader|wait-healthy [s]|kill-node N|start-node N|stop-etcd|start-etcd" >&2; exit 2 ;;
esac
