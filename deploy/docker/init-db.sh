#!/bin/sh
# First start of the postgis container: the same roles and schemas as the local stack.
set -e
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -v db=app_backend -f /docker-entrypoint-initdb.d/bootstrap.sql.in
