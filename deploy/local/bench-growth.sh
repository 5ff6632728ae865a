# make bench, growth run (sourced by bench.sh, with its services, users and helpers): the hot
# paths measured on the bench database as it is, then again after a year of one app's history
# is written into it (deploy/bench/growth.sql: 1,000,000 accounts and subscriptions, 10,000,000
# ledger rows, ad requests and ad views), each phase starting from restarted services (empty
# caches). Prints each figure's ratio grown / small, and every periodic query's plan and time on
# the grown database (`admin periodic-queries --analyze`, nothing due).
GROW_USERS=${BENCH_GROWTH_USERS:-1000000}
GROW_SECONDS=${BENCH_GROWTH_SECONDS:-$DURATION}

psql_bench() { psql_admin -d app_backend_bench "$@"; }

# What the measured users hold in both phases: ten ledger rows and a balance each, and one
# free content rule to check access to.
log "growth: ledger rows for the bench users, a content rule"
psql_bench -c "
  SET session_replication_role = replica;
  INSERT INTO subscription.credit_ledger (app_id, user_id, amount, source, reference_id, balance_after, created_at)
  SELECT app_id, id, 5, 'ad_reward', 'bench-' || k, 5 * k, now() - k * interval '1 day'
  FROM auth.users, generate_series(1, 10) k WHERE app_id = '$APP_ID' AND guest_device_id LIKE 'bench-user-%';
  INSERT INTO subscription.credit_balances (app_id, user_id, balance)
  SELECT app_id, id, 50 FROM auth.users WHERE app_id = '$APP_ID' AND guest_device_id LIKE 'bench-user-%'
  ON CONFLICT (app_id, user_id) DO NOTHING;" >/dev/null
"$BIN/subscription-service" admin content set --app-id "$APP_ID" --content-id bench-quiz --level free >/dev/null

# One phase: restart, then every hot path for GROW_SECONDS; files $BENCH/grow-$1-<path>.txt.
grow_phase() {
  local tag=$1 u="$BENCH/users.txt"   # $2: the address block of its sign-ups
  stop_services
  # The machine's own speed drifts between the phases (other tenants of the host): pgbench -S
  # on its separate database, untouched by the growth, measures it for each phase.
  runuser -u postgres -- "$PGBIN/pgbench" -h "$SOCK" -p "$PORT" -S -c 16 -j 2 -T "$GROW_SECONDS" pgbench_scratch 2>/dev/null \
    | awk '/^tps/ {print int($3)}' | head -1 > "$BENCH/grow-$tag-pgbench.txt"
  start_services
  make_sessions "$BENCH/grow-$tag-tokens.txt" "grow-$tag" "$2"
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/refresh.lua http://127.0.0.1:3001 -- "$APP_ID" "$API_KEY" \
    "$BENCH/grow-$tag-tokens.txt" 2 > "$BENCH/grow-$tag-refresh.txt"
  # The first seconds after the restart: most reads meet their user for the first time.
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    /subscription/v1/subscriptions/me "$u" > "$BENCH/grow-$tag-me-cold.txt"
  wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" /subscription/v1/subscriptions/me "$u" each >/dev/null
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    /subscription/v1/subscriptions/me "$u" > "$BENCH/grow-$tag-me.txt"
  local ads="/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits"
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" \
    "$ads" "$u" > "$BENCH/grow-$tag-ads-cold.txt"
  wrk -t2 -c32 -d5s -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" "$ads" "$u" each >/dev/null
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3004 -- "$APP_ID" "$API_KEY" \
    "$ads" "$u" > "$BENCH/grow-$tag-ads.txt"
  # The players' own devices (1-5 each, as in the main run: one more would be a 6th, refused).
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    /subscription/v1/content/bench-quiz/check-access "$u" random POST devices > "$BENCH/grow-$tag-check-access.txt"
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    /subscription/v1/credits/balance "$u" > "$BENCH/grow-$tag-balance.txt"
  wrk -t2 -c32 -d"${GROW_SECONDS}s" --latency -s deploy/bench/random_user.lua http://127.0.0.1:3002 -- "$APP_ID" "$API_KEY" \
    "/subscription/v1/credits/transactions?limit=20" "$u" > "$BENCH/grow-$tag-transactions.txt"
  wrk -t2 -c16 -d3s -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" "$NEARBY_URL" >/dev/null
  wrk -t2 -c16 -d"${GROW_SECONDS}s" --latency -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $ME_TOKEN" \
    "$NEARBY_URL" > "$BENCH/grow-$tag-nearby.txt"
  for s in auth subscription ads offline; do
    DATABASE_NAME=app_backend_bench "$BIN/$s-service" admin periodic-queries --analyze > "$BENCH/grow-$tag-periodic-$s.txt"
  done
}

log "growth: the hot paths on the bench database as it is (${GROW_SECONDS}s each)"
grow_phase small 11
log "growth: writing ${GROW_USERS} accounts of history (deploy/bench/growth.sql)"
grow_sql() { PGOPTIONS="-c client_min_messages=warning" runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres \
  -d app_backend_bench -v app="$APP_ID" -v users="$GROW_USERS" -v part="$1" -f deploy/bench/growth.sql > "$BENCH/growth-$1.log"; }
seed_start=$(date +%s)
grow_sql prepare
grow_sql auth & A=$!
grow_sql subscription & S=$!
grow_sql ads & D=$!
wait $A; wait $S; wait $D
grow_sql finish
SEED_SECONDS=$(( $(date +%s) - seed_start ))
ROWS=$(psql_bench -At -c "SELECT (SELECT count(*) FROM auth.users) || ' users, ' || (SELECT count(*) FROM subscription.subscriptions) || ' subscriptions, '
  || (SELECT count(*) FROM subscription.credit_ledger) || ' ledger rows, ' || (SELECT count(*) FROM ads.ad_views) || ' ad views, '
  || (SELECT count(*) FROM subscription.access_logs) || ' access decisions'")
log "growth: the same hot paths on the grown database"
grow_phase grown 12

PG_SMALL=$(cat "$BENCH/grow-small-pgbench.txt"); PG_GROWN=$(cat "$BENCH/grow-grown-pgbench.txt")
ratio() { awk -v a="$(rps "$BENCH/grow-grown-$1.txt")" -v b="$(rps "$BENCH/grow-small-$1.txt")" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
# The same ratio with each phase's figure taken relative to that phase's pgbench -S.
relative() { awk -v r="$(ratio "$1")" -v s="$PG_SMALL" -v g="$PG_GROWN" 'BEGIN {printf "%.2f", (g > 0 ? r * s / g : 0)}'; }
row() {
  printf '%-44s %9s req/s  p99 %-9s %9s req/s  p99 %-9s  %s x   %s x   non-2xx: %s/%s\n' "$2" \
    "$(rps "$BENCH/grow-small-$1.txt")" "$(p99 "$BENCH/grow-small-$1.txt")" "$(rps "$BENCH/grow-grown-$1.txt")" "$(p99 "$BENCH/grow-grown-$1.txt")" \
    "$(ratio "$1")" "$(relative "$1")" "$(non2xx "$BENCH/grow-small-$1.txt")" "$(non2xx "$BENCH/grow-grown-$1.txt")"
}
periodic_rows() {
  for s in auth subscription ads offline; do
    LC_ALL=C join -t '|' <(awk '{name = ""; for (i = 2; i <= NF - 3; i++) name = name (i > 2 ? " " : "") $i; print $1 " " name "|" $(NF-1) }' "$BENCH/grow-small-periodic-$s.txt" | LC_ALL=C sort) \
                <(awk '{name = ""; for (i = 2; i <= NF - 3; i++) name = name (i > 2 ? " " : "") $i; print $1 " " name "|" $(NF-2) "|" $(NF-1) }' "$BENCH/grow-grown-periodic-$s.txt" | LC_ALL=C sort) \
      | awk -F'|' '{printf "  %-58s %9.3f ms  %9.3f ms  %s\n", $1, $2, $4, $3}'
  done
}
GROWTH_TABLE=$(cat <<TXT

== growth: the same paths on a grown database (${GROW_SECONDS}s per run, restarted services per phase) ==
grown database: ${ROWS}
  (written by deploy/bench/growth.sql in ${SEED_SECONDS} s)
pgbench -S at the start of each phase: ${PG_SMALL} tps (small), ${PG_GROWN} tps (grown)
path                                         small                          grown                          grown/small, and relative to pgbench (target >= 0.9)
$(row refresh "POST /auth/refresh (rotation, 32 conns)")
$(row me-cold "GET /subscriptions/me, first meetings")
$(row me "GET /subscriptions/me, steady")
$(row ads-cold "GET /ads/available, first meetings")
$(row ads "GET /ads/available, steady")
$(row check-access "POST /content/{id}/check-access")
$(row balance "GET /credits/balance")
$(row transactions "GET /credits/transactions?limit=20")
$(row nearby "GET /location/nearby-content (16 conns)")
  (nearby reads no table the growth writes to: its ratio is this run's noise)
periodic queries, EXPLAIN ANALYZE, nothing due  small         grown         plan on the grown database (target < 10 ms)
  (SEQ-SCAN on a table of a few rows is the planner's right choice; RetentionTests checks that an index serves each)
$(periodic_rows)
TXT
)
