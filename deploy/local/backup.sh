#!/usr/bin/env bash
# Backups of the local cluster with pgBackRest (#34): a full backup plus continuous WAL
# archiving into a repository under .data/backup/, and a point-in-time restore drill.
#   backup.sh backup    (make backup)  configure, create the stanza, take a full backup
#   backup.sh restore T DIR PORT        restore the cluster as of T into DIR, started on PORT
#   backup.sh drill     (make drill)   marked rows, T, more rows, restore to T, the services on it
# The running cluster's archive_command (stack.sh) hands every WAL segment to pgBackRest once
# `backup` has enabled the repository (and drops it before).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=$ROOT/.data
REPO=$DATA/backup
CONF=$REPO/pgbackrest.conf
PGBIN=/usr/lib/postgresql/15/bin
STANZA=app-backend
log() { printf '==> %s\n' "$*" >&2; }

command -v pgbackrest >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbackrest >/dev/null; }
bash deploy/local/stack.sh db >/dev/null
PORT=$(cat "$DATA/pg.port")
SOCK=$DATA/pg-socket
psql_admin() { PGOPTIONS="-c client_min_messages=warning" runuser -u postgres -- psql -X -q -tA -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres "$@"; }
pgbr() { runuser -u postgres -- pgbackrest --config="$CONF" --stanza=$STANZA "$@"; }

configure() {
  mkdir -p "$REPO/repo" "$REPO/log" "$REPO/lock" "$REPO/spool"
  # The repository keeps two full backups and the WAL from the oldest on; compressed with zstd.
  cat > "$CONF" <<CONF
[global]
repo1-path=$REPO/repo
repo1-retention-full=2
log-path=$REPO/log
lock-path=$REPO/lock
spool-path=$REPO/spool
compress-type=zst
start-fast=y
log-level-console=warn
log-level-file=info

[$STANZA]
pg1-path=$DATA/pg
pg1-port=$PORT
pg1-socket-path=$SOCK
pg1-user=postgres
CONF
  chown -R postgres:postgres "$REPO"
}

backup() {
  configure
  # archive_mode needs a restart to change (stack.sh starts the cluster with it on; a cluster
  # started by an older checkout is restarted once here).
  if [ "$(psql_admin -d postgres -c 'SHOW archive_mode')" != "on" ]; then
    log "restarting PostgreSQL with WAL archiving"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA/pg" -m fast -w stop >/dev/null
    bash deploy/local/stack.sh db >/dev/null
  fi
  pgbr stanza-create >/dev/null
  touch "$REPO/enabled"; chown postgres:postgres "$REPO/enabled"
  pgbr check >/dev/null
  local t0; t0=$(date +%s%3N)
  pgbr --type=full backup
  log "full backup in $(( $(date +%s%3N) - t0 )) ms; WAL archived continuously from now on"
  pgbr info >&2
}

# Restores the repository's latest backup and replays WAL up to T into DIR (a fresh data
# directory), then starts it on PORT and waits until it has been promoted.
restore() { # $1 = T (a timestamptz), $2 = DIR, $3 = PORT
  local target=$1 dir=$2 port=$3
  rm -rf "$dir"; mkdir -p "$dir"; chown postgres:postgres "$dir"; chmod 700 "$dir"
  pgbr --pg1-path="$dir" --type=time "--target=$target" --target-action=promote --target-exclusive restore >/dev/null
  # The copy must not archive into the repository of the cluster it came from.
  echo "archive_mode = off" >> "$dir/postgresql.auto.conf"
  mkdir -p "$dir.sock"; touch "$dir.log"; chown postgres:postgres "$dir.sock" "$dir.log"
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 120 start \
    -o "-p $port -k $dir.sock -c listen_addresses=127.0.0.1 -c max_connections=300" >/dev/null
  for _ in $(seq 1 600); do
    [ "$(runuser -u postgres -- psql -X -tA -h "$dir.sock" -p "$port" -U postgres -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = "f" ] && return 0
    sleep 0.1
  done
  log "the restored cluster did not finish its recovery:"; tail -20 "$dir.log" >&2
  return 1
}

# The drill: a backup taken while writes go on, marked rows before and after T, a restore to T in
# a fresh data directory, the four services started on the copy.
drill() {
  local db=app_backend_pitr dir=$DATA/pitr-restore port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  PGOPTIONS="-c client_min_messages=warning" runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres \
    -d postgres -v db=$db -f deploy/local/bootstrap.sql >/dev/null
  local bin; bin=$(swift build --show-bin-path)
  for s in auth subscription offline ads; do
    DATABASE_HOST=127.0.0.1 DATABASE_PORT=$PORT DATABASE_NAME=$db ENVIRONMENT=local "$bin/$s-service" migrate >/dev/null 2>&1
  done
  psql_admin -d $db -c "CREATE TABLE public.pitr_marks (id bigserial PRIMARY KEY, phase text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())" >/dev/null

  mkdir -p "$REPO"
  # A backup taken during writes: a writer commits a row every 10 ms throughout.
  ( while true; do psql_admin -d $db -c "INSERT INTO public.pitr_marks (phase) VALUES ('during-backup')" >/dev/null 2>&1 || true; sleep 0.01; done ) &
  local writer=$!
  backup 2>"$REPO/drill-backup.log" || { kill $writer; cat "$REPO/drill-backup.log" >&2; return 1; }
  grep -E "^==> full backup" "$REPO/drill-backup.log" >&2 || true
  kill $writer 2>/dev/null; wait $writer 2>/dev/null || true

  psql_admin -d $db -c "INSERT INTO public.pitr_marks (phase) SELECT 'before' FROM generate_series(1, 500)" >/dev/null
  local before; before=$(psql_admin -d $db -c "SELECT count(*) FROM public.pitr_marks")
  sleep 1
  local T; T=$(psql_admin -d postgres -c "SELECT clock_timestamp()")
  sleep 1
  psql_admin -d $db -c "INSERT INTO public.pitr_marks (phase) SELECT 'after' FROM generate_series(1, 300)" >/dev/null
  # RPO: how long a committed row waits to be in the repository. The segment holding it is
  # closed (pg_switch_wal, as archive_timeout does every 60 s) and pushed.
  local committed archived wal
  committed=$(date +%s%3N)
  wal=$(psql_admin -d postgres -c "SELECT pg_walfile_name(pg_switch_wal())")
  for _ in $(seq 1 300); do
    [ "$(psql_admin -d postgres -c "SELECT last_archived_wal >= '$wal' FROM pg_stat_archiver")" = "t" ] && break
    sleep 0.05
  done
  archived=$(date +%s%3N)

  log "restoring to T=$T into a fresh data directory"
  local t0 t1; t0=$(date +%s%3N)
  restore "$T" "$dir" "$port"
  t1=$(date +%s%3N)
  local rsock=$dir.sock
  local counts; counts=$(runuser -u postgres -- psql -X -tA -h "$rsock" -p "$port" -U postgres -d $db \
    -c "SELECT count(*) FILTER (WHERE phase IN ('during-backup', 'before')), count(*) FILTER (WHERE phase = 'after'), count(*) FILTER (WHERE at > '$T') FROM public.pitr_marks")
  local got_before=${counts%%|*} rest=${counts#*|}
  local got_after=${rest%%|*} later=${rest#*|}
  local ok=1
  [ "$got_before" = "$before" ] || { log "rows before T: $got_before of $before"; ok=0; }
  [ "$got_after" = "0" ] && [ "$later" = "0" ] || { log "rows after T in the restore: $got_after (stamped after T: $later)"; ok=0; }

  # The services on the restored copy: every one passes its readiness.
  bash deploy/local/stack.sh stop-services >/dev/null 2>&1 || true
  local pids=() s ready=0
  for s in auth subscription offline ads; do
    DATABASE_HOST=127.0.0.1 DATABASE_PORT=$port DATABASE_NAME=$db ENVIRONMENT=local DATA_DIR=$dir.services LOG_LEVEL=error \
      "$bin/$s-service" serve >>"$dir.services.log" 2>&1 &
    pids+=($!)
  done
  local t2; t2=$(date +%s%3N)
  for _ in $(seq 1 300); do
    ready=0
    for p in 3001 3002 3003 3004; do curl -fsS -o /dev/null "http://127.0.0.1:$p/ready" 2>/dev/null && ready=$((ready + 1)); done
    [ $ready = 4 ] && break
    sleep 0.2
  done
  local t3; t3=$(date +%s%3N)
  kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir" "$dir.sock" "$dir.services"
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  [ $ready = 4 ] || { log "services ready on the restored copy: $ready of 4 (log: $dir.services.log)"; ok=0; }
  [ $ok = 1 ] || { echo "DRILL FAILED: point-in-time restore" >&2; return 1; }
  echo "point-in-time restore: full backup taken during writes; $before rows before T and 300 after; restored to T into a fresh data directory:" \
       "exactly the $before rows before T, none after; the four services ready on the copy." \
       "RPO: a commit was in the repository $(( archived - committed )) ms after its segment closed (segments close at most every 60 s: archive_timeout)." \
       "RTO: restore and recovery $(( t1 - t0 )) ms, services ready $(( t3 - t2 )) ms later"
}

case "${1:-}" in
  backup) backup ;;
  restore) configure; restore "$2" "$3" "$4" ;;
  drill) drill ;;
  *) echo "usage: $0 backup | restore T DIR PORT | drill" >&2; exit 2 ;;
esac
