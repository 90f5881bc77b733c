#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine.
# Installs Debian's docker.io when no engine is installed (needs root and apt), then starts
# dockerd in the background when none answers. Waits at most 60 s for the engine.
set -euo pipefail

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  if [ "$(id -u)" != "0" ]; then
    echo "ensure-docker: no Docker engine installed and not root; install docker.io first" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" != "0" ]; then
  echo "ensure-docker: the Docker engine does not answer and only root can start dockerd" >&2
  exit 1
fi

echo "ensure-docker: starting dockerd in the background (log: /var/log/loopsmith-dockerd.log)"
nohup dockerd >/var/log/loopsmith-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "ensure-docker: dockerd did not answer within 60 s; see /var/log/loopsmith-dockerd.log" >&2
exit 1
