#!/usr/bin/env bash
# The local stack: a private PostgreSQL 15 + PostGIS cluster under .data/, the four services
# and the nginx gateway. Used by `make run`, `make test`, `make stop`, `make logs`.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=$ROOT/.data
PGDATA=$DATA/pg
SOCK=$DATA/pg-socket
RUN=$DATA/run
LOGS=$DATA/logs
PGBIN=/usr/lib/postgresql/15/bin
SERVICES=(auth subscription offline ads)
CONFIG=${CONFIG:-debug}
GATEWAY_PORT=${GATEWAY_PORT:-8080}
COLLECTOR_PORT=${COLLECTOR_PORT:-4318}
# The local stack runs with the built-in local secrets; outside it the services refuse them.
export ENVIRONMENT=${ENVIRONMENT:-local}
mkdir -p "$DATA" "$RUN" "$LOGS"

# Each line says how far into the run it is (seconds): CI's log shows where its minutes go.
log() { printf '==> [%4d s] %s\n' "$SECONDS" "$*" >&2; }

deps() {
  local missing=()
  for p in libcurl4-openssl-dev zlib1g-dev libpq-dev libssl-dev postgresql-15 postgresql-15-postgis-3 pgbouncer nginx curl openssl python3-venv chromium-headless-shell chromium chromium-driver pgbackrest; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

pg_port() {
  if [ -f "$DATA/pg.port" ]; then cat "$DATA/pg.port"; return; fi
  local p=54329
  while (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null; do p=$((p+1)); done
  echo $p > "$DATA/pg.port"; echo $p
}

psql_admin() { PGOPTIONS="-c client_min_messages=warning" runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$(pg_port)" -U postgres "$@"; }

db_start() {
  local port; port=$(pg_port)
  mkdir -p "$SOCK"
  chown postgres:postgres "$DATA/pg-socket"
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    log "initialising PostgreSQL cluster in $PGDATA"
    mkdir -p "$PGDATA"; chown postgres:postgres "$PGDATA"; chmod 700 "$PGDATA"
    runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null
  fi
  touch "$LOGS/postgres.log"; chown postgres:postgres "$LOGS/postgres.log"
  # WAL archiving is always on (it needs a restart to turn on); each segment goes to pgBackRest
  # once `make backup` has enabled the repository (deploy/local/backup.sh), at least every 60 s;
  # before that it is not kept. A failed push makes PostgreSQL keep the segment and try again.
  cat > "$PGDATA/stack.conf" <<CONF
archive_mode = on
archive_command = 'test ! -f $DATA/backup/enabled || pgbackrest --config=$DATA/backup/pgbackrest.conf --stanza=app-backend archive-push %p'
archive_timeout = 60
# The time each WAL write and flush took, in pg_stat_wal (#48: make bench's check-access rows
# say how long the commits' flushes kept the cores waiting). Two clock reads per flush.
track_wal_io_timing = on
CONF
  chown postgres:postgres "$PGDATA/stack.conf"
  grep -q "^include_if_exists = 'stack.conf'" "$PGDATA/postgresql.conf" || echo "include_if_exists = 'stack.conf'" >> "$PGDATA/postgresql.conf"
  if ! runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    log "starting PostgreSQL on 127.0.0.1:$port"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOGS/postgres.log" -w -t 30 start \
      -o "-p $port -k $SOCK -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=256MB -c fsync=${PG_FSYNC:-on}" >/dev/null
  fi
}

db_bootstrap() { # $1 = database name
  psql_admin -d postgres -v db="$1" -f deploy/local/bootstrap.sql >/dev/null
}

db_recreate() { # $1 = database name (tests start from an empty database)
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" >/dev/null
  db_bootstrap "$1"
}

build() { # the compiler's progress goes to a log; its tail is shown when the build fails
  log "building ($CONFIG): $LOGS/build.log"
  # #50 a target that imports a module it does not declare fails the build (a Domain target
  # importing PostgresNIO, say), instead of finding it in the build directory by chance.
  if ! swift build -c "$CONFIG" --explicit-target-dependency-import-check error ${BUILD_FLAGS:-} > "$LOGS/build.log" 2>&1; then
    grep -aE "error:" "$LOGS/build.log" | head -40 >&2
    tail -n 40 "$LOGS/build.log" >&2
    return 1
  fi
  tail -n 1 "$LOGS/build.log" >&2
}

bin_dir() { swift build -c "$CONFIG" --show-bin-path; }

env_for_stack() { # the environment every service process gets
  export DATABASE_HOST=127.0.0.1 DATABASE_PORT=$(pg_port) DATABASE_NAME=${DATABASE_NAME:-app_backend} DATA_DIR=$DATA
  # #49: every request traced to the local collector (collector_start), exported every 0.5 s.
  # TRACING=off runs the stack without (nothing is bootstrapped then).
  if [ "${TRACING:-on}" != off ]; then
    export OTEL_EXPORTER_OTLP_ENDPOINT=${OTEL_EXPORTER_OTLP_ENDPOINT:-http://127.0.0.1:$COLLECTOR_PORT}
    export OTEL_BSP_SCHEDULE_DELAY=${OTEL_BSP_SCHEDULE_DELAY:-500}
  fi
  if [ -f .env ]; then set -a; . ./.env; set +a; fi
}

# #49: the local trace collector, an OTLP/HTTP receiver writing spans to .data/traces/spans.jsonl
# (`make trace ID=...` prints one request's story). In Kubernetes the OpenTelemetry Collector.
collector_tools() {
  if [ ! -x "$DATA/venv/bin/python" ]; then python3 -m venv "$DATA/venv"; fi
  "$DATA/venv/bin/python" -c 'import opentelemetry.proto' 2>/dev/null \
    || "$DATA/venv/bin/pip" install -q --disable-pip-version-check opentelemetry-proto==1.45.2 >/dev/null
}
collector_start() {
  [ "${TRACING:-on}" = off ] && return 0
  if [ -f "$RUN/collector.pid" ] && alive "$(cat "$RUN/collector.pid")"; then return 0; fi
  collector_tools
  # The traces of this run of the stack only (a full `make test` writes some 60 MB).
  mkdir -p "$DATA/traces"; : > "$DATA/traces/spans.jsonl"
  nohup "$DATA/venv/bin/python" deploy/local/otlp_receiver.py "$COLLECTOR_PORT" "$DATA/traces/spans.jsonl" </dev/null >>"$LOGS/collector.log" 2>&1 &
  echo $! > "$RUN/collector.pid"
  for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$COLLECTOR_PORT/health" 2>/dev/null && return 0; sleep 0.1; done
  log "the trace collector did not start (see $LOGS/collector.log)"; return 1
}

demo_app() {
  env_for_stack
  local bin; bin=$(bin_dir)
  if [ -f "$DATA/demo.env" ]; then
    . "$DATA/demo.env"
    local found
    found=$(psql_admin -d "$DATABASE_NAME" -tA -c "SELECT count(*) FROM auth.applications WHERE id = '$APP_ID'" 2>/dev/null || echo 0)
    if [ "$found" = "1" ]; then return; fi
  fi
  log "creating the demo application"
  "$bin/auth-service" admin apps create --name "Quiz Geography" --env > "$DATA/demo.env.tmp"
  mv "$DATA/demo.env.tmp" "$DATA/demo.env"
  . "$DATA/demo.env"
  # The seed's paywall: two plans, and content rules for the demo catalogue.
  "$bin/subscription-service" admin plans seed-defaults --app-id "$APP_ID" >/dev/null
  "$bin/subscription-service" admin content set --app-id "$APP_ID" --content-id capitals-europe --level free >/dev/null
  "$bin/subscription-service" admin content set --app-id "$APP_ID" --content-id capitals-world --level premium >/dev/null
  "$bin/subscription-service" admin content set --app-id "$APP_ID" --content-id flags-asia --level freemium --cost 3 --hours 24 >/dev/null
  "$bin/offline-service" admin seed-demo --app-id "$APP_ID" >/dev/null
  # AdMob's public test units: the demo app shows test ads only.
  "$bin/ads-service" admin set-provider --app-id "$APP_ID" --name admob --priority 1 --test-mode --ecpm-estimate-usd 12 \
    --rewarded-unit ca-app-pub-3940256099942544/5224354917 --interstitial-unit ca-app-pub-3940256099942544/1033173712 >/dev/null
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# #30 the local APNs (HTTP/2 over TLS, its own CA) and FCM stand-ins, with an APNs key and an
# FCM service account made here; auth is pointed at them (APNS_URL, FCM_URL, ...) and the demo
# app gets the keys through the operator's routes (push_demo_keys), so a push lands in
# .data/logs/push-standin.log.
push_standin_start() {
  local dir=$DATA/push
  mkdir -p "$dir"
  if [ ! -f "$dir/apns.p8" ]; then
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$dir/apns.p8"
    openssl ec -in "$dir/apns.p8" -pubout -out "$dir/apns.pub" 2>/dev/null
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$dir/fcm.pem" 2>/dev/null
    openssl rsa -in "$dir/fcm.pem" -pubout -out "$dir/fcm.pub" 2>/dev/null
  fi
  # A fresh one each time: it remembers the provider tokens it saw (Apple's 20-minute rule),
  # which a recreated database no longer knows.
  if [ -f "$RUN/push-standin.pid" ]; then kill "$(cat "$RUN/push-standin.pid")" 2>/dev/null || true; rm -f "$RUN/push-standin.pid"; fi
  local apns http; apns=$(free_port); http=$(free_port)
  nohup "$(bin_dir)/push-standin" --apns-port "$apns" --http-port "$http" --ca-out "$dir/ca.pem" \
    --apns-key "DEMOTEAM01:DEMOKEY001:$dir/apns.pub" --fcm-account "push@demo-quiz.iam.gserviceaccount.com:$dir/fcm.pub" \
    ${PUSH_STANDIN_FLAGS:-} </dev/null >>"$LOGS/push-standin.log" 2>&1 &
  echo $! > "$RUN/push-standin.pid"
  cat > "$dir/push.env" <<ENV
APNS_URL=https://localhost:$apns
APNS_CA_BUNDLE=$dir/ca.pem
FCM_URL=http://127.0.0.1:$http
GOOGLE_OAUTH_TOKEN_URL=http://127.0.0.1:$http/token
PUSH_STANDIN_URL=http://127.0.0.1:$http
ENV
  . "$dir/push.env"
  for _ in $(seq 1 100); do curl -fsS -o /dev/null "$PUSH_STANDIN_URL/_standin/stats" 2>/dev/null && break; sleep 0.1; done
  export APNS_URL APNS_CA_BUNDLE FCM_URL GOOGLE_OAUTH_TOKEN_URL PUSH_STANDIN_URL
}

# The demo app's APNs key and FCM service account, set as its operator would (PUT /admin/push/...).
push_demo_keys() {
  local dir=$DATA/push
  . "$DATA/demo.env"
  python3 - "$dir" "$APP_ID" "$API_KEY" "$GATEWAY_PORT" <<'PY'
import json, sys, urllib.request
d, app, key, port = sys.argv[1:]
h = {"X-App-ID": app, "X-API-Key": key, "Authorization": "Bearer local-admin-token", "Content-Type": "application/json"}
def put(path, body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}/auth/v1/admin/push/{path}", data=json.dumps(body).encode(), headers=h, method="PUT")
    urllib.request.urlopen(r).read()
put("apns", {"team_id": "DEMOTEAM01", "key_id": "DEMOKEY001", "topic": "com.quiz.geography", "environment": "sandbox",
             "private_key": open(f"{d}/apns.p8").read()})
put("fcm", {"service_account": {"type": "service_account", "project_id": "demo-quiz", "client_email": "push@demo-quiz.iam.gserviceaccount.com",
                                "private_key": open(f"{d}/fcm.pem").read()}})
PY
}

# A killed service may linger as a zombie (nothing reaps it in a container): not alive.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != "Z" ]; }

services_start() {
  env_for_stack
  local bin; bin=$(bin_dir)
  for s in "${SERVICES[@]}"; do
    local pidf="$RUN/$s.pid"
    if [ -f "$pidf" ] && alive "$(cat "$pidf")"; then continue; fi
    log "starting $s-service"
    nohup "$bin/$s-service" serve </dev/null >>"$LOGS/$s.log" 2>&1 &
    echo $! > "$pidf"
  done
}

gateway_start() {
  local conf=$DATA/nginx
  mkdir -p "$conf/logs" "$conf/tmp"
  # Same file as the container image, with the upstream hosts of the local stack and its
  # worker count (#48: one on a 2-core host shared with everything; `auto` where it ships).
  sed -e 's/server auth:3001/server 127.0.0.1:3001/; s/server subscription:3002/server 127.0.0.1:3002/' \
      -e 's/server offline:3003/server 127.0.0.1:3003/; s/server ads:3004/server 127.0.0.1:3004/' \
      -e "s/listen 8080/listen 127.0.0.1:$GATEWAY_PORT/" -e "s|alias /srv/console/;|alias $PWD/Console/;|" \
      -e "s/^worker_processes auto;/worker_processes ${GATEWAY_WORKER_PROCESSES:-1};/" \
      deploy/gateway/nginx.conf > "$conf/nginx.conf"
  if [ -f "$conf/nginx.pid" ] && kill -0 "$(cat "$conf/nginx.pid")" 2>/dev/null; then
    nginx -p "$conf" -c "$conf/nginx.conf" -g "pid $conf/nginx.pid; user root;" -s reload
  else
    log "starting the gateway on 127.0.0.1:$GATEWAY_PORT"
    nginx -p "$conf" -c "$conf/nginx.conf" -g "pid $conf/nginx.pid; user root;" </dev/null >>"$LOGS/gateway.log" 2>&1
  fi
}

service_port() {
  case $1 in auth) echo "${AUTH_PORT:-3001}" ;; subscription) echo "${SUBSCRIPTION_PORT:-3002}" ;;
    offline) echo "${OFFLINE_PORT:-3003}" ;; ads) echo "${ADS_PORT:-3004}" ;; esac
}

# Ready on each service's own port (/ready is for operators, not behind the gateway), then
# healthy through the gateway.
wait_ready() {
  for s in "${SERVICES[@]}"; do
    local ok=0
    for _ in $(seq 1 300); do
      if curl -fsS -o /dev/null "http://127.0.0.1:$(service_port "$s")/ready" 2>/dev/null \
         && curl -fsS -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/$s/v1/health" 2>/dev/null; then ok=1; break; fi
      sleep 0.2
    done
    if [ $ok = 0 ]; then log "$s is not ready; last log lines:"; tail -20 "$LOGS/$s.log" >&2; return 1; fi
  done
}

stop() {
  for s in "${SERVICES[@]}"; do
    local pidf="$RUN/$s.pid"
    if [ -f "$pidf" ]; then kill "$(cat "$pidf")" 2>/dev/null || true; rm -f "$pidf"; fi
  done
  for stub in receipt-stub game-stub push-standin collector; do
    if [ -f "$RUN/$stub.pid" ]; then kill "$(cat "$RUN/$stub.pid")" 2>/dev/null || true; rm -f "$RUN/$stub.pid"; fi
  done
  local conf=$DATA/nginx
  if [ -f "$conf/nginx.pid" ]; then nginx -p "$conf" -c "$conf/nginx.conf" -g "pid $conf/nginx.pid; user root;" -s quit 2>/dev/null || true; fi
  if [ -s "$PGDATA/PG_VERSION" ]; then runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m fast stop >/dev/null 2>&1 || true; fi
}

python_tools() { # reference tools for tests, in a venv under .data
  if [ ! -x "$DATA/venv/bin/python" ]; then python3 -m venv "$DATA/venv"; fi
  "$DATA/venv/bin/pip" install -q --disable-pip-version-check aiosmtpd kubernetes-validate pyyaml zxcvbn==4.5.0 \
    schemathesis==3.39.16 hypothesis==6.122.3 standardwebhooks==1.0.0 selenium==4.51.0 >/dev/null
  # axe-core 4.12 as this package carries it; the console's test injects the script through
  # Selenium (Playwright itself is not needed: --no-deps).
  "$DATA/venv/bin/pip" install -q --disable-pip-version-check --no-deps axe-playwright-python==0.1.8 >/dev/null
}

stop_services_only() {
  # A stale pid (the process is gone) is not an error: stopping is what was asked.
  for s in "${SERVICES[@]}"; do [ -f "$RUN/$s.pid" ] && { kill "$(cat "$RUN/$s.pid")" 2>/dev/null || true; }; rm -f "$RUN/$s.pid"; done
  local conf=$DATA/nginx
  [ -f "$conf/nginx.pid" ] && nginx -p "$conf" -c "$conf/nginx.conf" -g "pid $conf/nginx.pid; user root;" -s quit 2>/dev/null
  return 0
}

# The XCTest suite in two runs at once, each under its own watchdog with its output in a log
# file: the stack's tests (StackTests, through the running services; they mostly wait on real
# time: the journey waits out a two-minute subscription) and the in-process tests (on the unit
# database). The two share nothing but the cluster, and each alone left the 2 cores ~90 % idle
# (measured: 624 s in one run). The console gets each failure and the totals (the services'
# warnings in a full run are hundreds of kilobytes, and a console that stops draining must never
# stall a test). When no test case starts or ends for TEST_HANG_SECONDS (the journey, the
# longest, takes ~2.5 min), the database's sessions and the test process's threads are printed
# and the run fails instead of hanging until CI's own limit. TEST_FLAGS (e.g. --filter X) runs
# `swift test` once instead.
run_xctest() {
  if [ -n "${TEST_FLAGS:-}" ]; then run_xctest_part all swift test --skip-build ${TEST_FLAGS}; return; fi
  local bin listed stack unit
  bin="$(bin_dir)/app-backendPackageTests.xctest"
  listed=$("$bin" --list-tests | grep -E '^[A-Za-z]+Tests\.[A-Za-z]+/' | cut -d/ -f1 | sort -u)
  stack=$(grep '^StackTests\.' <<<"$listed" | paste -sd, -)
  unit=$(grep -v '^StackTests\.' <<<"$listed" | paste -sd, -)
  [ -n "$stack" ] && [ -n "$unit" ] || { log "no tests listed by $bin"; return 1; }
  { run_xctest_part stack "$bin" "$stack" && after_stack_tests; } & local a=$!
  run_xctest_part unit "$bin" "$unit" & local b=$!
  local rc=0
  wait "$a" || rc=1
  wait "$b" || rc=1
  return $rc
}

run_xctest_part() { # $1 = the part's name, then the command
  local part=$1; shift
  local out=$LOGS/xctest-$part.log diag=$LOGS/xctest-$part-hang.txt
  rm -f "$diag"
  log "running the XCTest suite ($part): $out"
  set +e
  stdbuf -oL -eL "$@" > "$out" 2>&1 &
  local runner=$!
  xctest_watchdog "$out" "$diag" "$runner" &
  local dog=$!
  wait "$runner"; local rc=$?
  kill "$dog" 2>/dev/null; wait "$dog" 2>/dev/null
  set -e
  { grep -aE "^/.*:[0-9]+: error: |^Test Case .* failed" "$out" | head -n 60; grep -aA1 -E "^Test Suite '(All|Selected) tests'" "$out" | tail -n 2; } >&2 || true
  if [ -s "$diag" ]; then cat "$diag" >&2; return 1; fi
  if [ $rc -ne 0 ]; then log "XCTest ($part) failed ($rc); the last lines of $out:"; tail -n 80 "$out" >&2; fi
  log "XCTest ($part) done"
  return $rc
}

xctest_watchdog() { # $1 = the test output, $2 = where the diagnosis goes, $3 = the runner
  local limit=${TEST_HANG_SECONDS:-600} last="" since; since=$(date +%s)
  while sleep 10; do
    local now; now=$(date +%s)
    local cur; cur=$(grep -aE "^Test Case '.*' (started|passed|failed)" "$1" 2>/dev/null | tail -1)
    if [ "$cur" != "$last" ]; then last=$cur; since=$now; continue; fi
    [ $((now - since)) -lt "$limit" ] && continue
    {
      echo "==> HANG: no test case started or ended for ${limit}s; the last line was: $cur"
      echo "==> the last lines of the test output:"
      tail -n 30 "$1" | cut -c1-400
      echo "==> database sessions that are not idle:"
      psql_admin -d postgres -c "SELECT datname, application_name, pid, state, wait_event_type, wait_event,
          now() - xact_start AS in_transaction, now() - state_change AS in_state, left(query, 200) AS query
        FROM pg_stat_activity WHERE datname IS NOT NULL AND state <> 'idle' ORDER BY xact_start" 2>&1
      psql_admin -d postgres -c "SELECT datname, application_name, count(*) FROM pg_stat_activity GROUP BY 1, 2 ORDER BY 1, 2" 2>&1
      # The test process: the runner itself, or the one `swift test` started.
      local pid=$3
      [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = swift-test ] && pid=$(pgrep -P "$3" -f 'PackageTests.xctest' | head -1)
      if [ -n "$pid" ]; then
        echo "==> test process $pid: $(ls /proc/"$pid"/task | wc -l) threads, $(ls /proc/"$pid"/fd | wc -l) descriptors"
        if command -v gdb >/dev/null; then
          timeout 180 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -aE '^Thread|^#' \
            | grep -avE 'in \?\? \(\)|epoll_wait|curl_multi_poll|__futex_abstimed|pthread_cond_(timed)?wait|sem_wait|_dispatch_sema4' | head -200
        fi
        kill -9 "$pid"
      fi
    } > "$2" 2>&1
    return
  done
}

# What uses only the running stack, run when the stack's XCTest cases are done (while the
# in-process ones go on): the console in a real Chromium, then the contract checks.
after_stack_tests() {
  log "console: Chromium through the gateway (Tests/Browser/console_test.py; screenshots in .data/console-screens)"
  "$DATA/venv/bin/python" Tests/Browser/console_test.py > "$LOGS/console-test.log" 2>&1 || { cat "$LOGS/console-test.log" >&2; log "console: FAILED"; return 1; }
  grep -c '^ok ' "$LOGS/console-test.log" | xargs -I{} echo "console: {} checks passed (the list: $LOGS/console-test.log)" >&2
  log "contracts: schemathesis against the OpenAPI documents, through the gateway"
  bash deploy/local/contracts.sh > "$LOGS/contracts.log" 2>&1 || { cat "$LOGS/contracts.log" >&2; log "contracts: FAILED"; return 1; }
  grep -aE '^==> schemathesis|passed|failed|error' "$LOGS/contracts.log" | grep -avE '^(GET|POST|PUT|PATCH|DELETE) ' | tail -n 24 >&2
}

# The repository stands alone: no tracked file may point at a folder beside it (a clone has
# nothing there). The pattern is written so that this file does not match it.
standalone_check() {
  local outside='[.][.]/shared' hits
  hits=$(git ls-files -z 2>/dev/null | xargs -0 grep -lE -- "$outside" 2>/dev/null || true)
  if [ -n "$hits" ]; then log "these tracked files refer to a folder outside the repository:"; echo "$hits" >&2; return 1; fi
}

# The stack `make test` runs against (test database, local StoreKit root, Apple's verifyReceipt
# and the game server played locally); `stack.sh test-up` starts it alone for debugging.
test_stack_up() {
  export DATABASE_NAME=app_backend_test
  demo_app
  # The journey test buys with StoreKit data it signs with a local chain; the stack trusts that
  # root for the demo app, in Apple's local ("Xcode") environment only.
  [ -f "$DATA/storekit/leaf.p8" ] || bash deploy/local/storekit_local.sh "$DATA/storekit" >/dev/null
  . "$DATA/demo.env"
  # Apple's verifyReceipt, played locally (legacy receipts in the contract run).
  RECEIPT_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 deploy/local/apple_receipt_stub.py "$RECEIPT_PORT" </dev/null >/dev/null 2>&1 &
  echo $! > "$RUN/receipt-stub.pid"
  export APPLE_VERIFY_RECEIPT_URL=http://127.0.0.1:$RECEIPT_PORT/verifyReceipt APPLE_VERIFY_RECEIPT_SANDBOX_URL=http://127.0.0.1:$RECEIPT_PORT/verifyReceipt
  # The quiz's game server, where offline sends queued actions (it refuses stale saves: 409).
  GAME_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 deploy/local/game_server_stub.py "$GAME_PORT" </dev/null >/dev/null 2>&1 &
  echo $! > "$RUN/game-stub.pid"
  export SYNC_UPSTREAMS="{\"*\":\"http://127.0.0.1:$GAME_PORT/sync\"}"
  push_standin_start
  collector_start
  # #49: the test stack keeps only the traces a client asks for (its traceparent's sampled
  # flag), as production at a low ratio keeps few: the fault check's late reward is then kept
  # only because every later delivery follows the decision stored with its row.
  export OTEL_TRACES_SAMPLER_ARG=${OTEL_TRACES_SAMPLER_ARG:-0}
  export APPLE_IAP_APPS="{\"$APP_ID\":{\"bundle_id\":\"com.quiz.geography\",\"environment\":\"Sandbox\",\"root_certificates_der_base64\":[\"$(cat "$DATA/storekit/root.der.b64")\"],\"allow_local_environments\":true,\"shared_secret\":\"local\"}}"
  services_start; gateway_start; wait_ready
  push_demo_keys
}

case "${1:-}" in
  run)
    deps; build; db_start; db_bootstrap app_backend
    DATABASE_NAME=app_backend demo_app
    push_standin_start
    collector_start
    DATABASE_NAME=app_backend services_start; gateway_start; wait_ready
    push_demo_keys
    . "$DATA/demo.env"
    cat <<TXT

The stack is up.
  gateway       http://127.0.0.1:$GATEWAY_PORT   (/auth/v1, /subscription/v1, /offline/v1, /ads/v1)
  services      auth :3001  subscription :3002  offline :3003  ads :3004
  PostgreSQL    127.0.0.1:$(pg_port)  database app_backend
  demo app      APP_ID=$APP_ID
                API_KEY=$API_KEY   (also in .data/demo.env)
  traces        make trace ID=<request id>   (spans in .data/traces/spans.jsonl)
  logs          make logs      stop: make stop
TXT
    ;;
  test)
    standalone_check
    deps; python_tools
    log "validating deploy/k8s"
    "$DATA/venv/bin/kubernetes-validate" --strict --quiet deploy/k8s/*.yaml deploy/k8s/cnpg/*.yaml
    db_start; db_recreate app_backend_test; db_recreate app_backend_unit
    BUILD_FLAGS=--build-tests build
    # After the build: it compares the image's pinned versions with what the build resolved.
    log "checking docker-compose.yml and the image"
    "$DATA/venv/bin/python" deploy/local/check_compose.py
    stop_services_only
    test_stack_up
    trap 'stop_services_only >/dev/null 2>&1 || true; kill $(cat "$RUN/receipt-stub.pid" "$RUN/game-stub.pid" "$RUN/push-standin.pid" "$RUN/collector.pid" 2>/dev/null) 2>/dev/null || true' EXIT
    env_for_stack
    [ -f .env ] && log "the stack runs with .env; the in-process tests take only the database settings from it"
    export TEST_UNIT_DATABASE=app_backend_unit TEST_PG_SOCKET=$SOCK TEST_GATEWAY_URL=http://127.0.0.1:$GATEWAY_PORT TEST_BIN_DIR=$(bin_dir) TEST_PYTHON=$DATA/venv/bin/python
    run_xctest
    [ -n "${TEST_FLAGS:-}" ] && after_stack_tests
    log "faults: subscription killed while rewards are earned; PostgreSQL restarted under load"
    "$DATA/venv/bin/python" deploy/local/faults.py
    ;;
  test-up) db_start; BUILD_FLAGS=--build-tests build; stop_services_only; [ -n "${FRESH:-}" ] && db_recreate app_backend_test; test_stack_up ;;   # the test stack, left running (FRESH=1: on a new database)
  stop) stop ;;
  start-services) env_for_stack; [ -f "$DATA/push/push.env" ] && { set -a; . "$DATA/push/push.env"; set +a; }; services_start; wait_ready ;;   # after a fault test stopped one
  stop-services)
    for s in "${SERVICES[@]}"; do [ -f "$RUN/$s.pid" ] && kill "$(cat "$RUN/$s.pid")" 2>/dev/null; rm -f "$RUN/$s.pid"; done ;;
  logs) tail -n 100 -F "$LOGS"/*.log ;;
  gateway) gateway_start ;;   # (re)start nginx in front of whatever serves ports 3001-3004 (make bench)
  db) deps; db_start; db_bootstrap app_backend ;;   # (make bench starts here: on a fresh machine it installs what it needs)
  reset-unit-db) db_start; db_recreate app_backend_unit ;;   # after editing an unreleased migration
  *) echo "usage: $0 run|test|test-up|stop|logs|gateway|db|start-services|stop-services|reset-unit-db" >&2; exit 2 ;;
esac
