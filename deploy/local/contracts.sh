#!/usr/bin/env bash
# Contract checks: schemathesis (PyPI) against each service's OpenAPI document, through the
# gateway, with the demo app's tenant headers and a fresh guest's token. No 5xx, no response
# that breaks its schema, no undocumented status code.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA_DIR:-$PWD/.data}
GATEWAY=${TEST_GATEWAY_URL:-http://127.0.0.1:${GATEWAY_PORT:-8080}}
. "$DATA/demo.env"
ST=$DATA/venv/bin/st
# The user (an account: guests have no cloud save to fuzz) signs up at auth directly, as its own
# client address, so the contract run does not share the per-address sign-up limit with the
# stack tests that ran before it.
TOKEN=$(curl -fsS -H "Content-Type: application/json" -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "X-Forwarded-For: 10.77.0.$((RANDOM % 250 + 1))" \
  -d "{\"provider\":\"email\",\"credentials\":{\"email\":\"contracts-$RANDOM$RANDOM@example.com\",\"password\":\"Tr1cky-Geography-42!\"}}" \
  "http://127.0.0.1:${AUTH_PORT:-3001}/auth/v1/auth/register" | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
# The four documents at once (each run waits mostly on its own requests; one after another took
# 178 s, auth alone 99 s), each run's report printed whole when it ends.
out=$(mktemp -d)
pids=()
for service in ${CONTRACT_SERVICES:-auth subscription offline ads}; do
  ( "$ST" run "$GATEWAY/$service/v1/openapi.json" --base-url "$GATEWAY" \
    -H "X-App-ID: $APP_ID" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $TOKEN" \
    --checks not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance \
    --hypothesis-max-examples "${CONTRACT_EXAMPLES:-30}" --hypothesis-seed 20261122 --hypothesis-suppress-health-check all \
    --experimental=openapi-3.1 --no-color --show-trace > "$out/$service.txt" 2>&1 ) &
  pids+=("$!:$service")
done
status=0
for entry in "${pids[@]}"; do
  service=${entry#*:}
  if wait "${entry%%:*}"; then result=passed; else result=FAILED; status=1; fi
  echo "==> schemathesis: $service ($result)"
  cat "$out/$service.txt"
done
rm -rf "$out"
exit $status
