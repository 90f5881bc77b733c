#!/usr/bin/env bash
# Writes the compose stack's .env (mode 0600) beside docker-compose.yml, keeping any value
# already there (the database volume keeps the password it was created with):
#   POSTGRES_PASSWORD  generated (32 random characters); compose has no default password
#   LOOPSMITH_NATS_<ROLE>_PASSWORD
#                      generated, one per NATS user (architect, builder, reviewer, executor,
#                      memory, client, admin): deploy/nats.conf gives each its permissions
#   DOCKER_GID         the group that owns the Docker socket, so the executor reaches the engine
#                      without running as root (DOCKER_SOCKET names another socket)
# With --local-images, also the names of the images built from Debian packages
# (`sudo npm run images`), for machines where no container registry answers:
#   LOOPSMITH_NATS_IMAGE, LOOPSMITH_POSTGRES_IMAGE, LOOPSMITH_RUNTIME_IMAGE
# And client.env (mode 0600) beside it: what a client on this host needs to reach the stack as
# the `client` user (NATS_URL, NATS_USER, NATS_PASSWORD, NATS_INBOX_PREFIX), for
# `npx loopsmith --env-from client.env …` or any NATS client.
# With --clients <names> (or LOOPSMITH_CLIENTS; names separated by commas or spaces), further
# client users, each the owner of its own tasks: LOOPSMITH_CLIENTS and a password each
# (LOOPSMITH_NATS_CLIENT_<NAME>_PASSWORD) in .env, client-<name>.env (mode 0600) per client,
# nats-clients.env (mode 0600; the nats service reads those passwords from it) and nats.conf,
# the server configuration with those users (`npx loopsmith bus config`: run `npm run build`
# first), which compose then mounts (LOOPSMITH_NATS_CONF=./nats.conf in .env), and
# nats-cluster.conf, the same for the nodes of deploy/compose.cluster.yml (LOOPSMITH_NATS_CLUSTER_CONF).
# With --engines (for deploy/compose.cluster.yml's extra Docker engines), sandbox-images.tar:
# `docker save` of the two sandbox images from this host's engine (LOOPSMITH_SANDBOX_PYTHON_IMAGE,
# LOOPSMITH_SANDBOX_NODE_IMAGE), which the executors on the other engines load them from
# (LOOPSMITH_SANDBOX_IMAGES); written again when an image is newer than the file.
# The model's API key is never written here: export ANTHROPIC_API_KEY in the shell that runs
# `docker compose up`, or add it to .env yourself.
# Usage: bash deploy/compose-env.sh [--local-images] [--engines] [--clients <names>] [--file <path>] [--client-file <path>]
set -euo pipefail
cd "$(dirname "$0")/.."
file=.env
client_file=client.env
local_images=0
engines=0
clients="${LOOPSMITH_CLIENTS:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --local-images) local_images=1 ;;
    --engines) engines=1 ;;
    --clients) clients=$2; shift ;;
    --file) file=$2; shift ;;
    --client-file) client_file=$2; shift ;;
    *) echo "compose-env: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

umask 077
touch "$file"
chmod 600 "$file"

# set_value NAME VALUE: sets NAME=VALUE in .env, replacing a value already there.
set_value() {
  grep -v "^$1=" "$file" >"$file.tmp" || true
  printf '%s=%s\n' "$1" "$2" >>"$file.tmp"
  mv "$file.tmp" "$file"
  echo "compose-env: $1 written"
}

# set_default NAME VALUE: appends NAME=VALUE unless .env already sets NAME.
set_default() {
  if grep -q "^$1=" "$file"; then
    echo "compose-env: $1 kept"
  else
    printf '%s=%s\n' "$1" "$2" >>"$file"
    echo "compose-env: $1 written"
  fi
}

# A letter, then letters and digits: nats-server parses a `$VARIABLE`'s value as a token, so a
# password such as 1e5… would be read as a number (deploy/nats.conf reads them that way).
secret() { printf '%s%s' "$(tr -dc 'A-Za-z' </dev/urandom | head -c 1)" "$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 31)"; }
set_default POSTGRES_PASSWORD "$(secret)"
for role in ARCHITECT BUILDER REVIEWER EXECUTOR MEMORY CLIENT ADMIN; do
  set_default "LOOPSMITH_NATS_${role}_PASSWORD" "$(secret)"
done
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
# The client's variables, from the password .env now holds (kept or generated).
client_password=$(grep '^LOOPSMITH_NATS_CLIENT_PASSWORD=' "$file" | tail -n 1 | cut -d= -f2-)
rm -f "$client_file"
touch "$client_file"
chmod 600 "$client_file"
cat >"$client_file" <<EOF
# The compose stack's client user (deploy/nats.conf): npx loopsmith --env-from client.env ...
NATS_URL=nats://127.0.0.1:4222
NATS_USER=client
NATS_PASSWORD=$client_password
NATS_INBOX_PREFIX=_INBOX_client
EOF
echo "compose-env: $file and $client_file ready (mode 600)"

# Further client users.
names=$(printf '%s' "$clients" | tr ', ' '\n\n' | grep -v '^$' || true)
if [ -n "$names" ]; then
  list=$(printf '%s' "$names" | paste -sd, -)
  set_value LOOPSMITH_CLIENTS "$list"
  rm -f nats-clients.env
  touch nats-clients.env
  chmod 600 nats-clients.env
  for name in $names; do
    case "$name" in
      *[!A-Za-z0-9_-]*) echo "compose-env: the client name $name is not valid: use letters, digits, '_' or '-'" >&2; exit 2 ;;
    esac
    var="LOOPSMITH_NATS_CLIENT_$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')_PASSWORD"
    set_default "$var" "$(secret)"
    password=$(grep "^$var=" "$file" | tail -n 1 | cut -d= -f2-)
    printf '%s=%s\n' "$var" "$password" >>nats-clients.env
    rm -f "client-$name.env"
    touch "client-$name.env"
    chmod 600 "client-$name.env"
    printf '# The compose stack'"'"'s client user %s: npx loopsmith --env-from client-%s.env ...\nNATS_URL=nats://127.0.0.1:4222\nNATS_USER=%s\nNATS_PASSWORD=%s\nNATS_INBOX_PREFIX=_INBOX_%s\n' "$name" "$name" "$name" "$password" "$name" >"client-$name.env"
  done
  LOOPSMITH_CLIENTS="$list" npx --no-install loopsmith bus config --out nats.conf
  # The same users for the three nodes of deploy/compose.cluster.yml.
  LOOPSMITH_CLIENTS="$list" npx --no-install loopsmith bus config --cluster-routes nats-route://nats:6222,nats-route://nats-2:6222,nats-route://nats-3:6222 --out nats-cluster.conf
  chmod 644 nats.conf nats-cluster.conf # no secret in them (passwords are $VARIABLES), and the servers read them
  set_value LOOPSMITH_NATS_CONF ./nats.conf
  set_value LOOPSMITH_NATS_CLUSTER_CONF ./nats-cluster.conf
  echo "compose-env: clients $list: client-<name>.env, nats-clients.env, nats.conf and nats-cluster.conf ready"
fi

# The sandbox images for the cluster file's extra engines (they start empty; no registry).
if [ "$engines" = 1 ]; then
  python_image="${LOOPSMITH_SANDBOX_PYTHON_IMAGE:-loopsmith/sandbox-python:local}"
  node_image="${LOOPSMITH_SANDBOX_NODE_IMAGE:-loopsmith/sandbox-node:local}"
  newest=0
  for image in "$python_image" "$node_image"; do
    created=$(docker image inspect -f '{{.Created}}' "$image" 2>/dev/null) || { echo "compose-env: no $image on this engine (sudo npm run images builds it)" >&2; exit 1; }
    t=$(date -d "$created" +%s); [ "$t" -gt "$newest" ] && newest=$t
  done
  if [ ! -f sandbox-images.tar ] || [ "$(stat -c %Y sandbox-images.tar)" -lt "$newest" ]; then
    docker save -o sandbox-images.tar.tmp "$python_image" "$node_image"
    chmod 644 sandbox-images.tar.tmp
    mv sandbox-images.tar.tmp sandbox-images.tar
    echo "compose-env: sandbox-images.tar written ($python_image, $node_image)"
  else
    echo "compose-env: sandbox-images.tar kept"
  fi
fi
