#!/usr/bin/env bash
# Writes the compose stack's .env (mode 0600) beside docker-compose.yml, keeping any value
# already there (the database volume keeps the password it was created with):
#   POSTGRES_PASSWORD  generated (32 random characters); compose has no default password
#   DOCKER_GID         the group that owns the Docker socket, so the executor reaches the engine
#                      without running as root (DOCKER_SOCKET names another socket)
# With --local-images, also the names of the images built from Debian packages
# (`sudo npm run images`), for machines where no container registry answers:
#   LOOPSMITH_NATS_IMAGE, LOOPSMITH_POSTGRES_IMAGE, LOOPSMITH_RUNTIME_IMAGE
# The model's API key is never written here: export ANTHROPIC_API_KEY in the shell that runs
# `docker compose up`, or add it to .env yourself.
# Usage: bash deploy/compose-env.sh [--local-images] [--file <path>]
set -euo pipefail
cd "$(dirname "$0")/.."
file=.env
local_images=0
while [ $# -gt 0 ]; do
  case "$1" in
    --local-images) local_images=1 ;;
    --file) file=$2; shift ;;
    *) echo "compose-env: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

umask 077
touch "$file"
chmod 600 "$file"

# set_default NAME VALUE: appends NAME=VALUE unless .env already sets NAME.
set_default() {
  if grep -q "^$1=" "$file"; then
    echo "compose-env: $1 kept"
  else
    printf '%s=%s\n' "$1" "$2" >>"$file"
    echo "compose-env: $1 written"
  fi
}

set_default POSTGRES_PASSWORD "$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)"
socket="${DOCKER_SOCKET:-/var/run/docker.sock}"
if [ -S "$socket" ]; then
  set_default DOCKER_GID "$(stat -c %g "$socket")"
else
  echo "compose-env: no Docker socket at $socket (is the engine running? DOCKER_SOCKET names another)" >&2
  exit 1
fi
if [ "$local_images" = 1 ]; then
  set_default LOOPSMITH_NATS_IMAGE loopsmith/nats:local
  set_default LOOPSMITH_POSTGRES_IMAGE loopsmith/postgres:local
  set_default LOOPSMITH_RUNTIME_IMAGE loopsmith/node-runtime:local
fi
echo "compose-env: $file ready (mode 600)"
