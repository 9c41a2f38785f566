#!/usr/bin/env bash
# Makes sure the local PostgreSQL is up, creates a fresh database for this run and prints its URL on stdout:
#   export CORRAL_TEST_DATABASE_URL=$(bash .ci/postgres.sh)
# The CI machine runs PostgreSQL on 127.0.0.1:5432 with trust auth for user `postgres` (see issue 4).
# Everything but the URL goes to stderr, so the command substitution captures only the URL.
set -euo pipefail

HOST=127.0.0.1
PORT=5432
USER_NAME=postgres

if ! pg_isready -q -h "$HOST" -p "$PORT"; then
  echo "postgres.sh: PostgreSQL is not accepting connections; starting the local cluster" >&2
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2
  for _ in $(seq 1 30); do
    pg_isready -q -h "$HOST" -p "$PORT" && break
    sleep 1
  done
  pg_isready -q -h "$HOST" -p "$PORT" || { echo "postgres.sh: PostgreSQL did not start" >&2; exit 1; }
fi

db="corral_ci_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
psql -h "$HOST" -p "$PORT" -U "$USER_NAME" -d postgres -v ON_ERROR_STOP=1 -q -c "CREATE DATABASE \"$db\"" >&2
echo "postgres://$USER_NAME@$HOST:$PORT/$db"
