#!/usr/bin/env bash
# Starts the cluster stack (deploy/compose.cluster.yml over the main file) and heals a known
# nats-server 2.10 fault on the way. On a fresh start, one node can miss the first JetStream
# meta election and never be added to the meta group (README, "Running on several machines").
# No 3-replica stream can then be placed, and bus-setup would give up after 150 s.
#
# So the three NATS nodes start first, and `loopsmith bus members` (in a throwaway container of
# the app image, on the stack's network) reads their monitoring ports. A node left out is
# restarted alone, which brings it in, at most three times. Then the rest of the stack starts
# with `docker compose up -d --wait` and the arguments given here.
#
# Usage: bash deploy/cluster-up.sh [--build] [further `docker compose up` arguments]
# With COMPOSE_FILE set (compose's own variable: files separated by ':'), compose reads the
# files from it instead (with COMPOSE_PROJECT_NAME, another project over the same files, as
# bench/chaos.ts --cluster runs it); the services must keep the names nats, nats-2, nats-3 and
# bus-setup.
# Exit codes: 0 the stack is up; 1 a node stayed out of the meta group; 3 no meta leader was
# elected; else docker compose's own.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${COMPOSE_FILE:-}" ]; then
  compose=(docker compose)
else
  compose=(docker compose -f docker-compose.yml -f deploy/compose.cluster.yml)
fi
nodes=(nats nats-2 nats-3)
monitor=http://nats:8222,http://nats-2:8222,http://nats-3:8222

for arg in "$@"; do
  # The app image is built once, by the memory service (docker-compose.yml).
  if [ "$arg" = "--build" ]; then "${compose[@]}" build memory; fi
done
"${compose[@]}" up -d "${nodes[@]}"

members() {
  "${compose[@]}" run --rm --no-deps -T bus-setup node /app/dist/cli.js bus members --monitor "$monitor" "$@"
}
healed=0
for round in 1 2 3 4; do
  set +e
  out=$(members --json)
  code=$?
  set -e
  [ "$code" = 0 ] && break
  if [ "$code" != 1 ] || [ "$round" = 4 ]; then
    echo "cluster-up: the JetStream meta group did not form (bus members exit $code):" >&2
    members >&2 || true
    exit "$code"
  fi
  # The nodes named under "leftOut" (server names, which are the compose services' names here).
  left=$(printf '%s' "$out" | grep -o '"leftOut":\[[^]]*\]' | grep -o '"[A-Za-z0-9_-]*"' | tr -d '"' | grep -v '^leftOut$' || true)
  echo "cluster-up: left out of the JetStream meta group: $(echo "$left" | tr '\n' ' ')— restarting (round $round)" >&2
  # shellcheck disable=SC2086 # one service name per word
  "${compose[@]}" restart $left
  healed=$((healed + 1))
done
[ "$healed" = 0 ] || echo "cluster-up: the meta group has every node after $healed restart round(s)" >&2

"${compose[@]}" up -d --wait "$@"
