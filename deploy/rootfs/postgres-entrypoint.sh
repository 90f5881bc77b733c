#!/bin/sh
# Entry point of the locally built PostgreSQL + pgvector image. It honours the same
# variables as the official postgres image (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB,
# PGDATA), so compose files and tests work with either image.
set -eu
BIN=/usr/lib/postgresql/17/bin
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
USER_NAME="${POSTGRES_USER:-postgres}"
DB_NAME="${POSTGRES_DB:-$USER_NAME}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
  echo "postgres-entrypoint: POSTGRES_PASSWORD is required" >&2
  exit 1
fi
mkdir -p "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  "$BIN/initdb" -D "$PGDATA" -U "$USER_NAME" --pwfile="$pwfile" --auth=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$DB_NAME" != "postgres" ]; then
    echo "CREATE DATABASE \"$DB_NAME\";" | "$BIN/postgres" --single -D "$PGDATA" postgres >/dev/null
  fi
fi
exec "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp "$@"
