#!/usr/bin/env bash
# make bench: the services in release mode on a bench database, loaded with wrk, beside
# pgbench -S on the same cluster in the same run. Prints ratios and figures for the notes.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=$ROOT/.data
BENCH=$DATA/bench
PGBIN=/usr/lib/postgresql/15/bin
DURATION=${BENCH_SECONDS:-10}
CORES=$(nproc)
mkdir -p "$BENCH"
log() { printf '==> %s\n' "$*" >&2; }

command -v wrk >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null; }
bash deploy/local/stack.sh db >/dev/null
PORT=$(cat "$DATA/pg.port")
SOCK=$DATA/pg-socket
psql_admin() { PGOPTIONS="-c client_min_messages=warning" runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres "$@"; }
# A cluster already running reads stack.sh's settings again (track_wal_io_timing).
psql_admin -d postgres -c "SELECT pg_reload_conf()" >/dev/null

# Built as the Dockerfile builds what ships: the Swift runtime linked in (#35: its calls no longer
# go through the PLT; /health 26.0 k -> 32.5 k req/s on one host).
log "building release binaries (static Swift runtime, as the Dockerfile)"
# The binaries the bench runs only (the generated app clients would double the first build).
for product in auth-service subscription-service offline-service ads-service push-standin; do
  swift build -c release --static-swift-stdlib --product "$product" >/dev/null
done
BIN=$(swift build -c release --static-swift-stdlib --show-bin-path)

log "bench database"
psql_admin -d postgres -c "DROP DATABASE IF EXISTS app_backend_bench WITH (FORCE)" >/dev/null
psql_admin -d postgres -v db=app_backend_bench -f deploy/local/bootstrap.sql >/dev/null

# The dev/test stack uses the same ports: stop its services for the run.
bash deploy/local/stack.sh stop-services >/dev/null 2>&1 || true

export DATABASE_HOST=127.0.0.1 DATABASE_PORT=$PORT DATABASE_NAME=app_backend_bench DATA_DIR=$BENCH LOG_LEVEL=error
export AUTH_REFRESH_LIMIT_PER_MINUTE=100000000
export ENVIRONMENT=local
"$BIN/auth-service" migrate >/dev/null
"$BIN/subscription-service" migrate >/dev/null
"$BIN/ads-service" migrate >/dev/null
"$BIN/offline-service" migrate >/dev/null
eval "$("$BIN/auth-service" admin apps create --name Bench --env)"
"$BIN/subscription-service" admin plans seed-defaults --app-id "$APP_ID" >/dev/null
# #35 the content the check-access row asks about (free: every check is admitted and logged).
"$BIN/subscription-service" admin content set --app-id "$APP_ID" --content-id bench-free --level free >/dev/null
"$BIN/ads-service" admin set-provider --app-id "$APP_ID" --name admob --priority 1 --test-mode --rewarded-unit test/rewarded >/dev/null

# #30 the push fan-out row: the APNs and FCM stand-ins (release build, quiet), auth pointed at them.
PUSHD=$BENCH/push; mkdir -p "$PUSHD"
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$PUSHD/apns.p8"
openssl ec -in "$PUSHD/apns.p8" -pubout -out "$PUSHD/apns.pub" 2>/dev/null
APNS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
STANDIN_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/push-standin" --apns-port "$APNS_PORT" --http-port "$STANDIN_PORT" --ca-out "$PUSHD/ca.pem" --apns-key "BENCHTEAM1:BENCHKEY01:$PUSHD/apns.pub" \
  --quiet >"$BENCH/push-standin.log" 2>&1 &
STANDIN_PID=$!
until curl -fsS -o /dev/null "http://127.0.0.1:$STANDIN_PORT/_standin/stats" 2>/dev/null; do sleep 0.05; done
export APNS_URL=https://localhost:$APNS_PORT APNS_CA_BUNDLE=$PUSHD/ca.pem

# BENCH_TRACING_RATIO=R: every service traced at ratio R, its spans dropped by a local receiver.
if [ -n "${BENCH_TRACING_RATIO:-}" ]; then
  OTLP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 deploy/local/otlp_receiver.py "$OTLP_PORT" --discard >/dev/null 2>&1 &
  export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$OTLP_PORT OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=$BENCH_TRACING_RATIO
else
  unset OTEL_EXPORTER_OTLP_ENDPOINT
fi
# Started again before each growth phase, so that both begin with empty caches.
start_services() {
  local t0
  t0=$(date +%s%3N)
  "$BIN/auth-service" serve >>"$BENCH/auth.log" 2>&1 &
  AUTH_PID=$!
  until curl -fsS -o /dev/null http://127.0.0.1:3001/ready 2>/dev/null; do sleep 0.01; done
  AUTH_READY_MS=$(( $(date +%s%3N) - t0 ))
  "$BIN/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
  SUB_PID=$!
  until curl -fsS -o /dev/null http://127.0.0.1:3002/ready 2>/dev/null; do sleep 0.01; done
  "$BIN/ads-service" serve >>"$BENCH/ads.log" 2>&1 &
  ADS_PID=$!
  until curl -fsS -o /dev/null http://127.0.0.1:3004/ready 2>/dev/null; do sleep 0.01; done
  "$BIN/offline-service" serve >>"$BENCH/offline.log" 2>&1 &
  OFF_PID=$!
  until curl -fsS -o /dev/null http://127.0.0.1:3003/ready 2>/dev/null; do sleep 0.01; done
}
stop_services() {
  kill $AUTH_PID $SUB_PID $ADS_PID $OFF_PID 2>/dev/null || true
  wait $AUTH_PID $SUB_PID $ADS_PID $OFF_PID 2>/dev/null || true
}
AUTH_PID= SUB_PID= ADS_PID= OFF_PID=
trap 'kill $AUTH_PID $SUB_PID $ADS_PID $OFF_PID $STANDIN_PID 2>/dev/null || true' EXIT
: > "$BENCH/auth.log"; : > "$BENCH/subscription.log"; : > "$BENCH/ads.log"; : > "$BENCH/offline.log"
start_services
ready_ms=$AUTH_READY_MS
H=(-H "Content-Type: application/json" -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY")
# Sessions for a refresh run (FILE TAG OCTET): 64 guest sign-ups, their refresh tokens one per
# line in FILE.
# Each call signs up from its own block of addresses (OCTET): the sign-up limit is per address.
make_sessions() {
  : > "$1"
  for i in $(seq 1 64); do
    curl -fsS "${H[@]}" -H "X-Forwarded-For: 10.$3.$((i / 250)).$((i % 250 + 1))" \
      -d "{\"provider\":\"guest\",\"credentials\":{\"device_id\":\"bench-$2-$i-$RANDOM\"}}" \
      http://127.0.0.1:3001/auth/v1/auth/register | sed -E 's/.*"refresh_token":"([^"]+)".*/\1/' >> "$1"
    echo >> "$1"
  done
  sed -i '/^$/d' "$1"
}
log "sessions for the refresh run"
make_sessions "$BENCH/tokens.txt" main 9
log "accounts for the login run"
: > "$BENCH/emails.txt"
for i in $(seq 1 16); do
  email="bench-$i-$RANDOM@example.com"
  curl -fsS -o /dev/null "${H[@]}" -H "X-Forwarded-For: 10.8.0.$i" \
    -d "{\"provider\":\"email\",\"credentials\":{\"email\":\"$email\",\"password\":\"Tr1cky-Geography-42\"}}" \
    http://127.0.0.1:3001/auth/v1/auth/register
  echo "$email" >> "$BENCH/emails.txt"
done

cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
# #45 each row's own CPU per unit, so that hosts of different speed compare: wrk ($3...) with its
# output in $2, and the CPU the processes $1 (space-separated) used meanwhile in $2.cpu.
# #48 and how busy the whole machine was meanwhile ($2.busy: cores, from /proc/stat).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8, $6}' /proc/stat; }
# Every process's CPU ticks by name ("comm ticks" lines): where a run's busy cores went. A
# process that exits between the glob and its read makes cat fail: not an error here.
ticks_by_name() { { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk '{c = $2; gsub(/[()]/, "", c); t[c] += $14 + $15} END {for (c in t) print c, t[c]}'; }
wrk_cpu() {
  local pids=$1 out=$2 b m0 m1; shift 2
  ticks_by_name > "$out.names0"
  b=$(cpu_ticks $pids); m0=$(machine_ticks)
  # wrk has exited before the second snapshot: its own CPU is taken by bash's `time`.
  { TIMEFORMAT='%U %S'; time wrk "$@" > "$out"; } 2> "$out.wrk"
  m1=$(machine_ticks); echo $(( $(cpu_ticks $pids) - b )) > "$out.cpu"
  ticks_by_name > "$out.names1"
  awk -v clk="$CLK" 'END {printf "wrk %.0f\n", ($1 + $2) * clk}' "$out.wrk" >> "$out.names1"
  # The cores each kind of process used over the run, and PostgreSQL's CPU per answered
  # request (#48: the database's share of a check is what the service's figure leaves out).
  awk -v all="$(echo "$m0 $m1" | awk '{print $5 - $2}')" -v n="$CORES" -v clk="$CLK" -v req="$(awk '/requests in/ {print $1}' "$out")" '
    FNR == NR {b[$1] = $2; next}
    {d = $2 - b[$1]; k = $1 ~ /^postgres/ ? "postgres" : $1 ~ /^(auth-service|ads-service|offline-service|subscription-se)$/ ? ($1 == "subscription-se" ? "subscription" : $1) : $1 ~ /^(wrk|nginx)$/ ? $1 : "other"; u[k] += d}
    END {for (k in u) if (u[k] > 0) s = s sprintf("%s%s %.2f", s == "" ? "" : ", ", k, u[k] / (all > 0 ? all : 1) * n)
         printf "%s; postgres %.0f us CPU per request", s, u["postgres"] / clk * 1e6 / (req > 0 ? req : 1)}' "$out.names0" "$out.names1" > "$out.where"
  # busy ticks / all ticks x cores: the cores in use over the run.
  echo "$m0 $m1" | awk -v n="$CORES" '{printf "%.2f", ($4 - $1) / (($5 - $2) > 0 ? ($5 - $2) : 1) * n}' > "$out.busy"
  # Of the rest, the cores idle while a process waited for the disk (PostgreSQL's WAL flush).
  echo "$m0 $m1" | awk -v n="$CORES" '{printf "%.2f", ($6 - $3) / (($5 - $2) > 0 ? ($5 - $2) : 1) * n}' > "$out.iowait"
}
# #48 what the database did for a run's writes: its commits, and the WAL flushes they waited
# for (pg_stat_wal, cluster-wide; timed with track_wal_io_timing, which stack.sh turns on).
wal_mark() {
  psql_admin -d app_backend_bench -tA -F ' ' -c "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
    wal_sync, wal_sync_time, (SELECT setting FROM pg_settings WHERE name = 'track_wal_io_timing') FROM pg_stat_wal" > "$1"
}
# "C commits (R rows a commit), F WAL flushes of U us each: S s of waiting in the run", from the
# marks $1.wal0 and $1.wal1 around the run whose wrk output is $1.
wal_line() {
  paste -d ' ' "$1.wal0" "$1.wal1" | awk -v req="$(awk '/requests in/ {print $1}' "$1")" '{
    c = $5 - $1; f = $6 - $2; t = $7 - $3
    printf "%d commits (%.1f rows a commit), %d WAL flushes", c, req / (c > 0 ? c : 1), f
    if ($8 == "on") printf " of %.0f us each: %.2f s waited in the run", t * 1000 / (f > 0 ? f : 1), t / 1000
    else printf " (their time untracked: track_wal_io_timing off)"
  }'
}
busy() { cat "$1.busy" 2>/dev/null || echo "?"; }
iowait() { cat "$1.iowait" 2>/dev/null || echo "?"; }
where() { cat "$1.where" 2>/dev/null || echo "?"; }
# Microseconds of that CPU per answered request of the run in $1.
us_per() { awk -v t="$(cat "$1.cpu" 2>/dev/null || echo 0)" -v c="$CLK" -v n="$(awk '/requests in/ {print $1}' "$1")" 'BEGIN {printf "%.0f", t / c * 1e6 / (n > 0 ? n : 1)}'; }
# The gateway's nginx workers (their CPU is the hop's).
gateway_pids() { pgrep -P "$(cat "$DATA/nginx/nginx.pid")" | tr '\n' ' '; }
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
# The peak (VmHWM) beside it: what a container's limit has to allow.
peak_mb() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
CLK=$(getconf CLK_TCK)
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() { awk '$1 == "99%" {print $2}' "$1"; }
non2xx() { awk '/Non-2xx/ {n = $5} END {print n + 0}' "$1"; }

# BENCH_ONLY=push: the push fan-out row alone (its users, then the row), for a quick figure;
# BENCH_ONLY=webhooks: the webhooks row alone.
if [ -z "${BENCH_ONLY:-}" ]; then
log "pgbench -S (same cluster)"
psql_admin -d postgres -c "DROP DATABASE IF EXISTS pgbench_scratch" >/dev/null
psql_admin -d postgres -c "CREATE DATABASE pgbench_scratch" >/dev/null
runuser -u postgres -- "$PGBIN/pgbench" -h "$SOCK" -p "$PORT" -i -s 10 -q pgbench_scratch >/dev/null 2>&1
PGBENCH_TPS=$(runuser -u postgres -- "$PGBIN/pgbench" -h "$SOCK" -p "$PORT" -S -c 16 -j 2 -T "$DURATION" pgbench_scratch 2>/dev/null \
  | awk '/^tps/ {print int($3)}' | head -1)

log "GET /auth/v1/health"
wrk_cpu "$AUTH_PID" "$BENCH/health.txt" -t2 -c32 -d"${DURATION}s" --latency http://127.0.0.1:3001/auth/v1/health

log "POST /auth/v1/auth/refresh (rotation)"
before=$(cpu_ticks $AUTH_PID)
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/refresh.lua http://127.0.0.1:3001 -- "$APP_ID" "$API_KEY" "$BENCH/tokens.txt" 2 > "$BENCH/refresh.txt"
after=$(cpu_ticks $AUTH_PID)
REFRESH_CPU=$(awk -v a="$after" -v b="$before" -v c="$CLK" 'BEGIN {printf "%.2f", (a - b) / c}')
REFRESH_RPS=$(rps "$BENCH/refresh.txt")
REFRESH_OK=$(awk -v r="$REFRESH_RPS" -v d="$DURATION" -v n="$(non2xx "$BENCH/refresh.txt")" 'BEGIN {printf "%.0f", r * d - (n == "" ? 0 : n)}')
# #35's latency target is at 300 rotations/s, not at saturation: the same run paced to 300/s.
make_sessions "$BENCH/tokens-paced.txt" paced 13
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/refresh.lua http://127.0.0.1:3001 -- "$APP_ID" "$API_KEY" "$BENCH/tokens-paced.txt" 2 300 32 \
  > "$BENCH/refresh-paced.txt"

log "bcrypt-12 on this machine"
BCRYPT_MS=$("$BIN/auth-service" admin bcrypt-time --rounds 8 | sed 's/bcrypt_verify_ms=//')
BCRYPT_LIMIT=$(awk -v c="$CORES" -v ms="$BCRYPT_MS" 'BEGIN {printf "%.2f", c * 1000 / ms}')

fi
if [ -z "${BENCH_ONLY:-}" ] || [ "${BENCH_ONLY}" = webhooks ]; then
  log "webhooks (#33): 10,000 events at 500/s handed to auth, delivered signed to a local receiver"
  WEBHOOKS=$(python3 deploy/bench/webhooks.py "$APP_ID" "$API_KEY" "$AUTH_PID" "$BENCH/hooks" 10000 500)
fi
[ "${BENCH_ONLY:-}" = webhooks ] && { echo "webhooks (10,000 events at 500/s)  $WEBHOOKS"; exit 0; }
log "GET /subscription/v1/subscriptions/me and /ads/v1/ads/available: ${BENCH_USERS:-10000} users, a random one per request"
ME_TOKEN=$(curl -fsS "${H[@]}" -H "X-Forwarded-For: 10.7.0.1" -d "{\"provider\":\"guest\",\"credentials\":{\"device_id\":\"bench-me-$RANDOM\"}}" \
  http://127.0.0.1:3001/auth/v1/auth/register | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
python3 deploy/bench/users.py "$APP_ID" "$API_KEY" "${BENCH_USERS:-10000}" "$BENCH/users.txt" --consent
USERS=$(wc -l < "$BENCH/users.txt")
# Each steady run is followed at once by the same run through the gateway (nginx, as in
# production: one more hop and its workers on the same cores), so both meet the same warm
# state (the device memory's minute, the caches) and their ratio is the hop's cost alone.
bash deploy/local/stack.sh gateway >/dev/null
GATEWAY=http://127.0.0.1:${GATEWAY_PORT:-8080}
# Its connections to the services are opened on first use: warm them first.
for prefix in subscription ads; do wrk -t2 -c32 -d2s "$GATEWAY/$prefix/v1/health" >/dev/null; done
# #46 the live row: one SSE stream per bench user through the gateway, 1,000 events/s for 10 s
# handed to auth as the outboxes do. Run last in a full run (10,000 open streams weigh on the
# RSS rows); BENCH_ONLY=live runs it alone.
live_row() {
  log "live (#46): $USERS streams through the gateway, 1,000 events/s for 10 s"
  LIVE=$(python3 deploy/bench/live.py "$APP_ID" "$API_KEY" "$AUTH_PID" "$BENCH/users.txt" "${GATEWAY_PORT:-8080}" "$USERS" 1000 10)
}
LIVE_LABEL="live (10,000 streams, 1,000 events/s)"
LIVE_TARGET="(target: p99 <= 250 ms, every event once, auth RSS <= 160 MB)"
[ "${BENCH_ONLY:-}" = live ] && { live_row; echo "$LIVE_LABEL  $LIVE   $LIVE_TARGET"; exit 0; }
# #47 the console row: 1,000,000 users with an e-mail in the app (written by SQL, as a long-lived
# app would have them), then the Users page's requests through the gateway. BENCH_ONLY=console
# runs it alone.
console_row() {
  log "console (#47): 1,000,000 users, find by e-mail + credits + timeline through the gateway"
  psql_admin -d app_backend_bench -c "INSERT INTO auth.users (app_id, email, email_verified, auth_provider, created_at)
    SELECT '$APP_ID', 'console-' || g || '@bench.example', true, 'email', now() - g * interval '1 second' FROM generate_series(1, 1000000) g" >/dev/null
  psql_admin -d app_backend_bench -c "ANALYZE auth.users" >/dev/null
  CONSOLE=$(python3 deploy/bench/console.py "$APP_ID" "$GATEWAY" 1000000 200)
}
CONSOLE_LABEL="console (find user + timeline, 1 M users)"
[ "${BENCH_ONLY:-}" = console ] && { console_row; echo "$CONSOLE_LABEL  $CONSOLE   (target: <= 1000 ms)"; exit 0; }
if [ -z "${BENCH_ONLY:-}" ]; then
# Twice: the first run meets users for the first time (each first read goes to the database);
# the second is the steady state.
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/subscriptions/me "$BENCH/users.txt" > "$BENCH/me-cold.txt"
# Then every user once in turn, so that the steady run is all steady (random picks leave some
# users unmet after the first run, and their first reads would set the steady p99).
wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/subscriptions/me "$BENCH/users.txt" each >/dev/null
wrk_cpu "$SUB_PID" "$BENCH/me.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/subscriptions/me "$BENCH/users.txt"
ME_RPS=$(rps "$BENCH/me.txt")
wrk_cpu "$(gateway_pids)" "$BENCH/me-gateway.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua "$GATEWAY" -- "$APP_ID" "$API_KEY" \
  /subscription/v1/subscriptions/me "$BENCH/users.txt"
SUB_RSS=$(rss_mb $SUB_PID)
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" \
  "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits" "$BENCH/users.txt" > "$BENCH/ads-cold.txt"
wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" \
  "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits" "$BENCH/users.txt" each >/dev/null
wrk_cpu "$ADS_PID" "$BENCH/ads.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" \
  "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits" "$BENCH/users.txt"
ADS_RPS=$(rps "$BENCH/ads.txt")
wrk_cpu "$(gateway_pids)" "$BENCH/ads-gateway.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua "$GATEWAY" -- "$APP_ID" "$API_KEY" \
  "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits" "$BENCH/users.txt"
ADS_RSS=$(rss_mb $ADS_PID)
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "${BENCH_ONLY}" = access ]; then
log "POST /content/{id}/check-access and GET /credits/balance: ${USERS} users, 1-5 devices each"
ACCESS_PATH=/subscription/v1/content/bench-free/check-access
# Each user's devices met once (as an app's players are, day to day), then the steady run.
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" random POST devices \
  > "$BENCH/access-cold.txt"
# Every device met before the steady run: five turns per user (50,000 checks for 10,000
# users), each thread stopping once its half is answered (wrk still waits out -d). A fixed 10 s
# left devices unmet (first meetings, a locked count and a write each, run at a quarter of the
# steady rate) and they fell into the steady run: 8,046 req/s against 12,200 with all met.
wrk -t2 -c32 -d40s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" each POST devices \
  $((USERS * 5 / 2)) >/dev/null
# Then each device once more, as a player's app checks again and again while playing (10 s:
# every device at the steady rate), so that the steady run starts with every device remembered
# and its sightings being written again (after 60-120 s) as they are in production.
wrk -t2 -c32 -d10s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" each POST devices >/dev/null
LOGS_BEFORE=$(psql_admin -d app_backend_bench -tA -c "SELECT count(*) FROM subscription.access_logs")
wal_mark "$BENCH/access.txt.wal0"
wrk_cpu "$SUB_PID" "$BENCH/access.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" random POST devices
wal_mark "$BENCH/access.txt.wal1"
LOGS_AFTER=$(psql_admin -d app_backend_bench -tA -c "SELECT count(*) FROM subscription.access_logs")
# #48 the same checks from 256 connections: bound by CPU, the rate grows with the load offered
# (target >= 1.5 x the 32-connection row).
wal_mark "$BENCH/access256.txt.wal0"
wrk_cpu "$SUB_PID" "$BENCH/access256.txt" -t2 -c256 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" random POST devices
wal_mark "$BENCH/access256.txt.wal1"
wrk_cpu "$(gateway_pids)" "$BENCH/access-gateway.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua "$GATEWAY" -- "$APP_ID" "$API_KEY" "$ACCESS_PATH" "$BENCH/users.txt" random POST devices
ACCESS_RPS=$(rps "$BENCH/access.txt")
# Every answered check logged: the steady run's answers against the rows it added.
ACCESS_ANSWERED=$(awk '/requests in/ {print $1}' "$BENCH/access.txt")
ACCESS_LOGGED=$((LOGS_AFTER - LOGS_BEFORE))
wrk -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/credits/balance "$BENCH/users.txt" > "$BENCH/balance-cold.txt"
wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/credits/balance "$BENCH/users.txt" each >/dev/null
wrk_cpu "$SUB_PID" "$BENCH/balance.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
  /subscription/v1/credits/balance "$BENCH/users.txt"
BALANCE_RPS=$(rps "$BENCH/balance.txt")
wrk_cpu "$(gateway_pids)" "$BENCH/balance-gateway.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua "$GATEWAY" -- "$APP_ID" "$API_KEY" \
  /subscription/v1/credits/balance "$BENCH/users.txt"
SUB_RSS=$(rss_mb $SUB_PID)
fi
# BENCH_ONLY=access: these two rows alone (with pgbench and the gateway runs), for a quick figure.
if [ "${BENCH_ONLY:-}" = access ]; then
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS pgbench_scratch" >/dev/null
  psql_admin -d postgres -c "CREATE DATABASE pgbench_scratch" >/dev/null
  runuser -u postgres -- "$PGBIN/pgbench" -h "$SOCK" -p "$PORT" -i -s 10 -q pgbench_scratch >/dev/null 2>&1
  PGBENCH_TPS=$(runuser -u postgres -- "$PGBIN/pgbench" -h "$SOCK" -p "$PORT" -S -c 16 -j 2 -T "$DURATION" pgbench_scratch 2>/dev/null \
    | awk '/^tps/ {print int($3)}' | head -1)
  echo "pgbench -S (16 clients)                 ${PGBENCH_TPS} tps"
  ACCESS_ONLY=1
fi
access_rows() { cat <<ROWS
POST /content/{id}/check-access (32 conns, ${USERS} users)  ${ACCESS_RPS} req/s   p99 $(p99 "$BENCH/access.txt")   = $(awk -v a="$ACCESS_RPS" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench (target >= 0.25, p99 <= 15 ms)   non-2xx: $(non2xx "$BENCH/access.txt")   subscription $(us_per "$BENCH/access.txt") us CPU per request
  first meeting of each device           $(rps "$BENCH/access-cold.txt") req/s   p99 $(p99 "$BENCH/access-cold.txt")
  answered / logged (steady run)         ${ACCESS_ANSWERED} / ${ACCESS_LOGGED}   machine $(busy "$BENCH/access.txt") of ${CORES} cores busy (target >= 1.9 of 2), $(iowait "$BENCH/access.txt") idle in I/O wait (cores by process: $(where "$BENCH/access.txt"))
  the database meanwhile                 $(wal_line "$BENCH/access.txt")
POST /content/{id}/check-access (256 conns, ${USERS} users)  $(rps "$BENCH/access256.txt") req/s   p99 $(p99 "$BENCH/access256.txt")   = $(awk -v a="$(rps "$BENCH/access256.txt")" -v b="$ACCESS_RPS" 'BEGIN {printf "%.2f", a / b}') x the 32-connection row (target >= 1.5)   non-2xx: $(non2xx "$BENCH/access256.txt")   subscription $(us_per "$BENCH/access256.txt") us CPU per request   machine $(busy "$BENCH/access256.txt") cores busy ($(where "$BENCH/access256.txt")); $(wal_line "$BENCH/access256.txt")
  through the gateway                    $(rps "$BENCH/access-gateway.txt") req/s   p99 $(p99 "$BENCH/access-gateway.txt")   = $(awk -v a="$(rps "$BENCH/access-gateway.txt")" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench   = $(awk -v a="$(rps "$BENCH/access-gateway.txt")" -v b="$(rps "$BENCH/access.txt")" 'BEGIN {printf "%.2f", a / b}') x direct (target >= 0.6)   non-2xx: $(non2xx "$BENCH/access-gateway.txt")   nginx $(us_per "$BENCH/access-gateway.txt") us CPU per request
GET /credits/balance (32 conns, ${USERS} users)  ${BALANCE_RPS} req/s   p99 $(p99 "$BENCH/balance.txt")   = $(awk -v a="$BALANCE_RPS" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench (target >= 0.5, p99 <= 10 ms)   non-2xx: $(non2xx "$BENCH/balance.txt")   subscription $(us_per "$BENCH/balance.txt") us CPU per request
  first meeting of each user             $(rps "$BENCH/balance-cold.txt") req/s   p99 $(p99 "$BENCH/balance-cold.txt")
  through the gateway                    $(rps "$BENCH/balance-gateway.txt") req/s   p99 $(p99 "$BENCH/balance-gateway.txt")   = $(awk -v a="$(rps "$BENCH/balance-gateway.txt")" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench   = $(awk -v a="$(rps "$BENCH/balance-gateway.txt")" -v b="$(rps "$BENCH/balance.txt")" 'BEGIN {printf "%.2f", a / b}') x direct (target >= 0.6)   non-2xx: $(non2xx "$BENCH/balance-gateway.txt")   nginx $(us_per "$BENCH/balance-gateway.txt") us CPU per request
ROWS
}
# #49 the cost of tracing: subscription restarted with tracing off, then sampling 1 % and every
# request (spans exported over OTLP/HTTP to a local sink that drops them), and the
# /subscriptions/me and check-access runs each time, after the same warm-up. BENCH_ONLY=tracing
# runs it alone. (BENCH_TRACING_RATIO=R runs every row of the bench traced at ratio R.)
tracing_row() {
  log "tracing (#49): /subscriptions/me and check-access with tracing off, at 0.01 and at 1.0, in ${TRACING_ROUNDS:-5} rounds"
  local port mode round rounds=${TRACING_ROUNDS:-5}; port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # The collector stands in for one on another machine: nginx accepts each export and drops it.
  # (The Python receiver the stack's tests read spans from took a share of these 2 cores at 1.0,
  # which the service's rate paid for.)
  local sink=$BENCH/otlp-sink; mkdir -p "$sink"
  cat > "$sink/nginx.conf" <<CONF
worker_processes 1;
error_log $sink/error.log;
events { worker_connections 256; }
http { access_log off; client_max_body_size 64m; client_body_buffer_size 4m;
  server { listen 127.0.0.1:$port; location = /v1/traces { return 200; } location / { return 404; } } }
CONF
  nginx -p "$sink" -c "$sink/nginx.conf" -g "pid $sink/nginx.pid; user root;"
  # A row that fails half-way (set -e) takes its sink down with the services.
  trap 'kill $AUTH_PID $SUB_PID $ADS_PID $OFF_PID $STANDIN_PID 2>/dev/null || true; kill "$(cat "'"$sink"'/nginx.pid" 2>/dev/null)" 2>/dev/null || true' EXIT
  # The machine drifts over the minutes of the row (two untraced runs of one full bench differed
  # by 16 %): each round's traced runs sit between two untraced ones and are costed against
  # their mean, and the row reports the median round. Untraced runs: off-0 ... off-N.
  local runs="off-0"
  for round in $(seq 1 "$rounds"); do runs="$runs 0.01-$round 1.0-$round off-$round"; done
  for mode in $runs; do
    kill $SUB_PID 2>/dev/null; wait $SUB_PID 2>/dev/null || true
    if [ "${mode#off}" != "$mode" ]; then
      env -u OTEL_EXPORTER_OTLP_ENDPOINT "$BIN/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
    else
      OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$port OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=${mode%-*} \
        "$BIN/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
    fi
    SUB_PID=$!
    until curl -fsS -o /dev/null http://127.0.0.1:3002/ready 2>/dev/null; do sleep 0.01; done
    wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
      /subscription/v1/subscriptions/me "$BENCH/users.txt" each >/dev/null
    wrk_cpu "$SUB_PID" "$BENCH/tracing-me-$mode.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- \
      "$APP_ID" "$API_KEY" /subscription/v1/subscriptions/me "$BENCH/users.txt"
    wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
      /subscription/v1/content/bench-free/check-access "$BENCH/users.txt" each POST devices >/dev/null
    wrk_cpu "$SUB_PID" "$BENCH/tracing-access-$mode.txt" -t2 -c32 -d"${DURATION}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- \
      "$APP_ID" "$API_KEY" /subscription/v1/content/bench-free/check-access "$BENCH/users.txt" random POST devices
  done
  # The same cost counted rather than timed: the instructions the service spends per request
  # under callgrind (every thread of the process). A count does not move with the neighbours,
  # which moved the timed rounds above by 10 % and more between adjacent runs on these hosts.
  # Untraced before and after; the pollers slowed alike in all four, as their cost is per
  # second and valgrind stretches the seconds 50-fold (counted.py takes off what is left).
  local cg=$BENCH/callgrind what
  command -v valgrind >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null; }
  rm -rf "$cg"; mkdir -p "$cg"
  # valgrind cannot read the release build's DWARF 5; a count needs no debugging information.
  strip -g -o "$cg/subscription-service" "$BIN/subscription-service"
  log "tracing (#49): instructions per request counted by callgrind, untraced, at 0.01, at 1.0 and untraced again"
  for mode in off-a 0.01 1.0 off-b; do
    kill $SUB_PID 2>/dev/null; wait $SUB_PID 2>/dev/null || true
    if [ "${mode#off}" != "$mode" ]; then
      env -u OTEL_EXPORTER_OTLP_ENDPOINT OUTBOX_POLL_MS=5000 JOB_POLL_MS=5000 SESSION_POLL_MS=5000 \
        valgrind --tool=callgrind --callgrind-out-file="$cg/$mode.%p" "$cg/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
    else
      OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$port OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=$mode \
        OUTBOX_POLL_MS=5000 JOB_POLL_MS=5000 SESSION_POLL_MS=5000 \
        valgrind --tool=callgrind --callgrind-out-file="$cg/$mode.%p" "$cg/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
    fi
    SUB_PID=$!
    until curl -fsS -o /dev/null --max-time 60 http://127.0.0.1:3002/ready 2>/dev/null; do sleep 0.5; done
    for what in "me GET /subscription/v1/subscriptions/me" "access POST /subscription/v1/content/bench-free/check-access"; do
      set -- $what
      python3 deploy/bench/counted.py "$SUB_PID" "$cg/$mode" "$APP_ID" "$API_KEY" 3002 "$3" "$2" "$BENCH/users.txt" 300 1000 \
        >"$cg/$1-$mode.count" 2>>"$cg/counted.log"
    done
  done
  kill $SUB_PID 2>/dev/null; wait $SUB_PID 2>/dev/null || true
  "$BIN/subscription-service" serve >>"$BENCH/subscription.log" 2>&1 &
  SUB_PID=$!
  until curl -fsS -o /dev/null http://127.0.0.1:3002/ready 2>/dev/null; do sleep 0.01; done
  nginx -p "$sink" -c "$sink/nginx.conf" -g "pid $sink/nginx.pid; user root;" -s quit
  # One round's cost: the fall in rate from the mean of the untraced runs on either side.
  round_cost() { awk -v a="$(rps "$BENCH/tracing-$1-off-$(($3 - 1)).txt")" -v z="$(rps "$BENCH/tracing-$1-off-$3.txt")" -v b="$(rps "$BENCH/tracing-$1-$2-$3.txt")" \
    'BEGIN {m = (a + z) / 2; printf "%.1f", (m - b) / m * 100}'; }
  # The median round (the lower middle one for an even count).
  cost() { local r; for r in $(seq 1 "$rounds"); do round_cost "$1" "$2" "$r"; echo; done | sort -g | sed -n "$(( (rounds + 1) / 2 ))p"; }
  rounds_of() { local r; for r in $(seq 1 "$rounds"); do printf '%s%s' "$([ "$r" -gt 1 ] && echo ", ")" "$(round_cost "$1" "$2" "$r")"; done; }
  figures() { local m; for m in $runs; do printf '%s=%s ' "$m" "$(rps "$BENCH/tracing-$1-$m.txt")/$(us_per "$BENCH/tracing-$1-$m.txt")us"; done; }
  # Counted: the rise in instructions per request over the mean of the untraced counts.
  counted() { awk -v a="$(cat "$BENCH/callgrind/$1-off-a.count")" -v z="$(cat "$BENCH/callgrind/$1-off-b.count")" -v b="$(cat "$BENCH/callgrind/$1-$2.count")" \
    'BEGIN {m = (a + z) / 2; printf "%.1f", (b - m) / m * 100}'; }
  counts() { local m; for m in off-a 0.01 1.0 off-b; do printf '%s%s=%s' "$([ "$m" != off-a ] && echo " ")" "$m" "$(cat "$BENCH/callgrind/$1-$m.count")"; done; }
  # The issue reads "A % / B %" after the label: the worse of the two paths at each ratio,
  # counted (the timed medians follow for the record).
  worst() { awk -v a="$(counted me "$1")" -v b="$(counted access "$1")" 'BEGIN {printf "%.1f", (a + 0 > b + 0 ? a : b)}'; }
  TRACING="$(worst 0.01) % / $(worst 1.0) %   (instructions per request counted by callgrind: me $(counted me 0.01) % / $(counted me 1.0) % [$(counts me)], check-access $(counted access 0.01) % / $(counted access 1.0) % [$(counts access)]; timed, median of $rounds rounds: me $(cost me 0.01) % / $(cost me 1.0) % [rounds $(rounds_of me 0.01) / $(rounds_of me 1.0)], check-access $(cost access 0.01) % / $(cost access 1.0) % [rounds $(rounds_of access 0.01) / $(rounds_of access 1.0)]; req/s and us CPU per request: me $(figures me); check-access $(figures access))"
}
TRACING_LABEL="tracing cost (ratio 0.01 / 1.0)"
TRACING_TARGET="(target: <= 5 % at 0.01, <= 20 % at 1.0)"
if [ "${BENCH_ONLY:-}" = tracing ]; then
  # The devices met first, as the access rows do.
  wrk -t2 -c32 -d40s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    /subscription/v1/content/bench-free/check-access "$BENCH/users.txt" each POST devices $((USERS * 5 / 2)) >/dev/null
  tracing_row; echo "$TRACING_LABEL  $TRACING   $TRACING_TARGET"; exit 0
fi
[ -n "${ACCESS_ONLY:-}" ] && { access_rows; exit 0; }
log "push fan-out: one content update to ${USERS} users (one iOS device each) through the APNs stand-in"
psql_admin -d app_backend_bench -c "
  INSERT INTO auth.privacy_settings (user_id, consent_notifications) SELECT id, true FROM auth.users WHERE app_id = '$APP_ID'
  ON CONFLICT (user_id) DO UPDATE SET consent_notifications = true;
  INSERT INTO auth.push_tokens (app_id, user_id, device_id, platform, token, environment, locale)
  SELECT app_id, id, 'bench-phone', 'ios', encode(sha256(id::text::bytea), 'hex'), 'sandbox', 'en' FROM auth.users WHERE app_id = '$APP_ID'
  ON CONFLICT DO NOTHING;" >/dev/null
psql_admin -d app_backend_bench -tA -c "SELECT user_id FROM auth.push_tokens WHERE app_id = '$APP_ID' LIMIT ${BENCH_PUSH_USERS:-10000}" > "$BENCH/push-users.txt"
python3 - "$APP_ID" "$API_KEY" "$PUSHD/apns.p8" <<'PY'
import json, sys, urllib.request
app, key, pem = sys.argv[1:]
body = {"team_id": "BENCHTEAM1", "key_id": "BENCHKEY01", "topic": "com.bench.app", "environment": "sandbox", "private_key": open(pem).read()}
urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:3001/auth/v1/admin/push/apns", data=json.dumps(body).encode(), method="PUT",
    headers={"X-App-ID": app, "X-API-Key": key, "Authorization": "Bearer local-admin-token", "Content-Type": "application/json"})).read()
PY
PUSH_FANOUT=$(python3 deploy/bench/push_fanout.py "$BENCH/push-users.txt" "$AUTH_PID" "$STANDIN_PID" "http://127.0.0.1:$STANDIN_PORT" "$APP_ID")
# The row's label as #30 names it (10,000 with its comma).
PUSH_USERS=$(wc -l < "$BENCH/push-users.txt" | sed -e ':a' -e 's/\B[0-9]\{3\}\>/,&/' -e 'ta')
[ "${BENCH_ONLY:-}" = push ] && { echo "push fan-out ($PUSH_USERS users, APNs stand-in)  $PUSH_FANOUT"; exit 0; }

log "GET /offline/v1/location/nearby-content over 1,000,000 points, 50 km"
psql_admin -d app_backend_bench -c "
  INSERT INTO offline.location_based_content (app_id, id, title, location)
  SELECT '$APP_ID', 'p' || g, 'Place ' || g,
         ST_SetSRID(ST_MakePoint(-10 + random() * 40, 36 + random() * 24), 4326)::geography  -- Europe
  FROM generate_series(1, 1000000) g;" >/dev/null
# As after any bulk load: statistics and the visibility map up to date, so that autovacuum does
# not start on the table during the runs below.
psql_admin -d app_backend_bench -c "VACUUM (ANALYZE) offline.location_based_content" >/dev/null
# And written out now, not by a checkpoint spread over the next minutes of runs.
psql_admin -d app_backend_bench -c "CHECKPOINT" >/dev/null
curl -fsS -o /dev/null -X PATCH -H "Content-Type: application/json" -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
  -d '{"consent_geolocation":true}' http://127.0.0.1:3001/auth/v1/auth/privacy
curl -fsS -o /dev/null -H "Content-Type: application/json" -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
  -d '{"latitude":48.8566,"longitude":2.3522,"accuracy":15,"source":"gps","consent_given":true}' http://127.0.0.1:3003/offline/v1/location/update
NEARBY_COUNT=$(curl -fsS -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
  "http://127.0.0.1:3003/offline/v1/location/nearby-content?radius_km=50" | grep -o '"distance_km"' | wc -l)
NEARBY_URL="http://127.0.0.1:3003/offline/v1/location/nearby-content?radius_km=50"
wrk -t2 -c16 -d3s -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" "$NEARBY_URL" >/dev/null
# The host's floor for that row: nginx answering a constant, through the same client and the
# same 16 connections. On 2 cores shared with wrk even this tail is milliseconds, and it moves
# with the host from minute to minute: each nearby run is paired with a floor run just before it.
FLOOR=$BENCH/floor; mkdir -p "$FLOOR"
cat > "$FLOOR/nginx.conf" <<CONF
worker_processes auto;
error_log $FLOOR/error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:${BENCH_FLOOR_PORT:-3099}; location / { default_type application/json; return 200 '{"status":"ok"}'; } } }
CONF
# One left by an interrupted run would hold the port.
if [ -f "$FLOOR/nginx.pid" ] && kill -0 "$(cat "$FLOOR/nginx.pid")" 2>/dev/null; then kill "$(cat "$FLOOR/nginx.pid")"; sleep 0.5; fi
nginx -p "$FLOOR" -c "$FLOOR/nginx.conf" -g "pid $FLOOR/nginx.pid; user root;"
FLOOR_URL=http://127.0.0.1:${BENCH_FLOOR_PORT:-3099}/
wrk -t2 -c16 -d3s "$FLOOR_URL" >/dev/null
# Three pairs; the row reports the nearby run with the median p99 (on 2 cores shared with wrk
# and PostgreSQL one run's tail moves by a millisecond either way), and prints all three.
for run in 1 2 3; do
  wrk -t2 -c16 -d"${DURATION}s" --latency "$FLOOR_URL" > "$BENCH/floor-$run.txt"
  wrk_cpu "$OFF_PID" "$BENCH/nearby-$run.txt" -t2 -c16 -d"${DURATION}s" --latency -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
    "$NEARBY_URL"
done
nginx -p "$FLOOR" -c "$FLOOR/nginx.conf" -g "pid $FLOOR/nginx.pid; user root;" -s quit
ms() { awk '{v = $1; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; printf "%.2f", v}' <<<"$1"; }
NEARBY_P99S=$(for run in 1 2 3; do echo "$(ms "$(awk '$1 == "99%" {print $2}' "$BENCH/nearby-$run.txt")") $run"; done | sort -n)
MEDIAN_RUN=$(echo "$NEARBY_P99S" | sed -n 2p | awk '{print $2}')
cp "$BENCH/nearby-$MEDIAN_RUN.txt" "$BENCH/nearby.txt"; cp "$BENCH/nearby-$MEDIAN_RUN.txt.cpu" "$BENCH/nearby.txt.cpu"
NEARBY_ALL=$(echo "$NEARBY_P99S" | awk '{printf "%s%s ms", (NR > 1 ? ", " : ""), $1}')
NEARBY_RPS=$(rps "$BENCH/nearby.txt")
FLOOR_ALL=$(for run in 1 2 3; do ms "$(awk '$1 == "99%" {print $2}' "$BENCH/floor-$run.txt")"; echo; done | awk '{printf "%s%s ms", (NR > 1 ? ", " : ""), $1}')
# Each pair's nearby p99 over its floor's; the median of the three.
FLOOR_RATIO=$(for run in 1 2 3; do
  echo "$(ms "$(awk '$1 == "99%" {print $2}' "$BENCH/nearby-$run.txt")") $(ms "$(awk '$1 == "99%" {print $2}' "$BENCH/floor-$run.txt")")"
done | awk '{printf "%.2f\n", $1 / $2}' | sort -n | sed -n 2p)
cp "$BENCH/floor-$MEDIAN_RUN.txt" "$BENCH/floor.txt"
# The latency of one request on its own (the 16-connection run measures throughput; on 2
# cores shared with wrk and PostgreSQL its latency is mostly queueing).
wrk -t1 -c1 -d"${DURATION}s" --latency -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
  "http://127.0.0.1:3003/offline/v1/location/nearby-content?radius_km=50" > "$BENCH/nearby1.txt"
OFF_RSS=$(rss_mb $OFF_PID)
p50() { awk '$1 == "50%" {print $2}' "$1"; }
log "a 1,000-item download job against a plain SELECT of the same rows"
DOWNLOAD=$("$BIN/offline-service" admin bench-download --items 1000 2>/dev/null | tail -1)

log "revocation: logout-all answered -> the old token refused at each service (200 users)"
REVOCATION=$(python3 deploy/bench/revocation.py "$APP_ID" "$API_KEY" "${BENCH_REVOCATION_USERS:-200}")

log "login flood + health latency during it"
wrk_cpu "$AUTH_PID" "$BENCH/login.txt" -t1 -c8 -d"${DURATION}s" --latency -s deploy/bench/login.lua http://127.0.0.1:3001 -- "$APP_ID" "$API_KEY" "$BENCH/emails.txt" &
FLOOD=$!
sleep 1
python3 deploy/bench/probe.py 127.0.0.1 3001 /auth/v1/health "$((DURATION - 2))" > "$BENCH/health-flood.txt"
wait $FLOOD
# Each service's resident size once its runs are over: a quiet moment first, as long as the
# services' own MALLOC_TRIM_SECONDS, so what was freed after the last burst is given back.
sleep "$(( ${MALLOC_TRIM_SECONDS:-10} + 1 ))"
RSS=$(rss_mb $AUTH_PID); SUB_RSS=$(rss_mb $SUB_PID); ADS_RSS=$(rss_mb $ADS_PID); OFF_RSS=$(rss_mb $OFF_PID)
AUTH_PEAK=$(peak_mb $AUTH_PID); SUB_PEAK=$(peak_mb $SUB_PID); ADS_PEAK=$(peak_mb $ADS_PID); OFF_PEAK=$(peak_mb $OFF_PID)
tracing_row
live_row
console_row
# Each service must have run its requests on the event loops (EventLoopGlobalExecutor): a binary
# where the hook was not taken answers on Swift's own pool, a fifth slower, and this run would
# measure that binary, not the one that ships.
EXECUTOR=""
for port in 3001 3002 3003 3004; do
  # awk compares the figure as a number (a missing or unreadable one prints nothing and fails).
  jobs=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '$1 == "executor_jobs_total" && $2 + 0 >= 1000 {printf "%d", $2}' || true)
  if [ -z "$jobs" ]; then
    echo "bench: the service on port $port ran fewer than 1,000 jobs on the event loops: not the shipped executor" >&2; exit 1
  fi
  EXECUTOR="$EXECUTOR $port:$jobs"
done

HEALTH_RPS=$(rps "$BENCH/health.txt")
LOGIN_RPS=$(rps "$BENCH/login.txt")
GROWTH_TABLE=""
[ "${BENCH_GROWTH:-1}" = 0 ] || . deploy/local/bench-growth.sh
TABLE=$(cat <<TXT

== make bench ($CORES cores, ${DURATION}s per run, release build, static Swift runtime) ==
executor jobs on the event loops       ${EXECUTOR# }
pgbench -S (16 clients)                 ${PGBENCH_TPS} tps
GET /auth/v1/health                     ${HEALTH_RPS} req/s   p99 $(p99 "$BENCH/health.txt")   = $(awk -v a="$HEALTH_RPS" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench   auth $(us_per "$BENCH/health.txt") us CPU per request
POST /auth/refresh (rotation)           ${REFRESH_RPS} req/s   p99 $(p99 "$BENCH/refresh.txt")   non-2xx: $(non2xx "$BENCH/refresh.txt")
  auth-service CPU during the run       ${REFRESH_CPU} s  ->  $(awk -v n="$REFRESH_OK" -v c="$REFRESH_CPU" 'BEGIN {printf "%.0f", n / c}') rotations per CPU-second (target >= 1200) = $(awk -v n="$REFRESH_OK" -v c="$REFRESH_CPU" 'BEGIN {printf "%.0f", c * 1e6 / n}') us CPU per rotation
  paced to 300/s                        $(rps "$BENCH/refresh-paced.txt") req/s   p99 $(p99 "$BENCH/refresh-paced.txt")   (target p99 <= 50 ms at 300/s)   non-2xx: $(non2xx "$BENCH/refresh-paced.txt")
bcrypt-12 verify                        ${BCRYPT_MS} ms  ->  limit = ${CORES} cores / that = ${BCRYPT_LIMIT} logins/s
POST /auth/login (email, 8 conns)       ${LOGIN_RPS} req/s  = $(awk -v a="$LOGIN_RPS" -v b="$BCRYPT_LIMIT" 'BEGIN {printf "%.2f", a / b}') x bcrypt limit (target >= 0.9)   auth $(us_per "$BENCH/login.txt") us CPU per login   non-2xx: $(non2xx "$BENCH/login.txt")
GET /auth/v1/health during the flood    $(cat "$BENCH/health-flood.txt")   (one probe every 20 ms; target p99 < 20 ms)
${TRACING_LABEL}  ${TRACING}   ${TRACING_TARGET}
GET /subscriptions/me (32 conns, ${USERS} users)  ${ME_RPS} req/s   p99 $(p99 "$BENCH/me.txt")   = $(awk -v a="$ME_RPS" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench (target >= 0.5, p99 <= 10 ms)   non-2xx: $(non2xx "$BENCH/me.txt")   subscription $(us_per "$BENCH/me.txt") us CPU per request
  first meeting of each user             $(rps "$BENCH/me-cold.txt") req/s   p99 $(p99 "$BENCH/me-cold.txt")
  through the gateway                    $(rps "$BENCH/me-gateway.txt") req/s   p99 $(p99 "$BENCH/me-gateway.txt")   = $(awk -v a="$(rps "$BENCH/me-gateway.txt")" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench   = $(awk -v a="$(rps "$BENCH/me-gateway.txt")" -v b="$(rps "$BENCH/me.txt")" 'BEGIN {printf "%.2f", a / b}') x direct (target >= 0.6)   non-2xx: $(non2xx "$BENCH/me-gateway.txt")   nginx $(us_per "$BENCH/me-gateway.txt") us CPU per request
GET /ads/available (32 conns, ${USERS} users)    ${ADS_RPS} req/s   p99 $(p99 "$BENCH/ads.txt")   = $(awk -v a="$ADS_RPS" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench (target >= 0.5, p99 <= 10 ms)   non-2xx: $(non2xx "$BENCH/ads.txt")   ads $(us_per "$BENCH/ads.txt") us CPU per request
  first meeting of each user             $(rps "$BENCH/ads-cold.txt") req/s   p99 $(p99 "$BENCH/ads-cold.txt")
  through the gateway                    $(rps "$BENCH/ads-gateway.txt") req/s   p99 $(p99 "$BENCH/ads-gateway.txt")   = $(awk -v a="$(rps "$BENCH/ads-gateway.txt")" -v b="$PGBENCH_TPS" 'BEGIN {printf "%.2f", a / b}') x pgbench   = $(awk -v a="$(rps "$BENCH/ads-gateway.txt")" -v b="$(rps "$BENCH/ads.txt")" 'BEGIN {printf "%.2f", a / b}') x direct (target >= 0.6)   non-2xx: $(non2xx "$BENCH/ads-gateway.txt")   nginx $(us_per "$BENCH/ads-gateway.txt") us CPU per request
$(access_rows)
GET /location/nearby-content (16 conns) ${NEARBY_RPS} req/s   p50 $(p50 "$BENCH/nearby.txt")   p99 $(p99 "$BENCH/nearby.txt")   (1,000,000 points, 50 km, ${NEARBY_COUNT} results; target p99 <= 5 ms)   non-2xx: $(non2xx "$BENCH/nearby.txt")   offline $(us_per "$BENCH/nearby.txt") us CPU per request
  p99 of the three runs                 ${NEARBY_ALL}   (the row above is the median run)
  one connection                        $(rps "$BENCH/nearby1.txt") req/s   p50 $(p50 "$BENCH/nearby1.txt")   p99 $(p99 "$BENCH/nearby1.txt")
  host floor (nginx constant, 16 conns) $(rps "$BENCH/floor.txt") req/s   p50 $(p50 "$BENCH/floor.txt")   p99 $(p99 "$BENCH/floor.txt")   (run just before each nearby run: ${FLOOR_ALL}; nearby p99 = ${FLOOR_RATIO} x its floor, median pair)
1,000-item download job                 ${DOWNLOAD}
  job vs plain SELECT                   $(echo "$DOWNLOAD" | awk -F'[ =]' '{for (i = 1; i <= NF; i++) {if ($i == "job_items_per_s") j = $(i+1); if ($i == "select_rows_per_s") s = $(i+1)}} END {printf "%.3f x", j / s}')
revocation (logout-all, ms)             ${REVOCATION}   (target p99 <= 5000)
push fan-out (${PUSH_USERS} users, APNs stand-in)  ${PUSH_FANOUT}   (target >= 2000 notifications/s)
webhooks (10,000 events at 500/s)  ${WEBHOOKS}   (target: commit->receipt p99 <= 1000 ms)
${LIVE_LABEL}  ${LIVE}   ${LIVE_TARGET}
${CONSOLE_LABEL}  ${CONSOLE}   (target: <= 1000 ms)
offline-service RSS after its run       ${OFF_RSS} MB (target <= 64)   peak ${OFF_PEAK} MB
ads-service RSS after its run           ${ADS_RSS} MB (target <= 64)   peak ${ADS_PEAK} MB
auth-service RSS after the runs         ${RSS} MB (target <= 64)   peak ${AUTH_PEAK} MB
subscription-service RSS after its run  ${SUB_RSS} MB (target <= 64)   peak ${SUB_PEAK} MB
auth-service ready after start          ${ready_ms} ms (target <= 1000)
${GROWTH_TABLE}
TXT
)
echo "$TABLE"
# The results file the README links: the table, the machine, the date; the history of what was
# measured before (from its "## History" heading on) is kept below it.
RESULTS=${BENCH_RESULTS:-BENCHMARKS.md}
HISTORY=$( [ -f "$RESULTS" ] && sed -n '/^## History/,$p' "$RESULTS" || true)
{
  echo "# Benchmark results"
  echo
  echo "Written by \`make bench\` on $(date -u +%Y-%m-%dT%H:%MZ): $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)),"
  echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM, PostgreSQL $(runuser -u postgres -- "$PGBIN/postgres" --version | awk '{print $3}'), release build,"
  echo "wrk and pgbench on the same machine as the services. Ratios are taken within this one run."
  echo
  echo '```'
  echo "$TABLE"
  echo '```'
  [ -z "$HISTORY" ] || printf '\n%s\n' "$HISTORY"
} > "$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
echo "results written to $RESULTS"

