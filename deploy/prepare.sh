#!/usr/bin/env bash
# Everything the tests and the demo need on this machine, installed when missing:
# node dependencies (npm ci), a Docker engine that answers, Compose v2, the images (built from
# Debian packages by deploy/build-images.sh when they are not present), Debian's
# chromium (the dashboard test renders the improvement dashboard in it, headless), and the
# JavaScript build (dist/app, `npm run build`), so the stacks the tests start run the
# services as users who built do (a build older than the sources is made again).
# Idempotent and quick when all is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules/vitest ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "prepare: installing node dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi

# Quick when the build is current (it checks the stamp and stops).
npm run --silent build

bash deploy/ensure-docker.sh
# Compose v2 (the compose test runs the README's `docker compose` lines as they are).
bash deploy/ensure-compose.sh

# The install test (tests/e2e/install.test.ts) runs the installed `loopsmith` as a user who is
# not root and is in the docker group, as users do: made here when this runs as root.
if [ "$(id -u)" = "0" ] && ! id loopsmith-ci >/dev/null 2>&1; then
  echo "prepare: adding the user loopsmith-ci (docker group) for the install test"
  getent group docker >/dev/null || groupadd --system docker
  useradd --create-home --groups docker --shell /bin/bash loopsmith-ci
fi

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" != "0" ]; then
    echo "prepare: the dashboard test needs Debian's chromium; run: sudo apt-get install -y chromium" >&2
    exit 1
  fi
  echo "prepare: installing chromium (headless, for the dashboard test)"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi

# The completion test loads the generated scripts in zsh and fish (bash is always there).
if ! command -v zsh >/dev/null 2>&1 || ! command -v fish >/dev/null 2>&1; then
  if [ "$(id -u)" != "0" ]; then
    echo "prepare: the completion test needs zsh and fish; run: sudo apt-get install -y zsh fish" >&2
    exit 1
  fi
  echo "prepare: installing zsh and fish (for the completion test)"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q zsh fish
fi

images=(
  "${LOOPSMITH_NATS_IMAGE:-loopsmith/nats:local}"
  "${LOOPSMITH_POSTGRES_IMAGE:-loopsmith/postgres:local}"
  "${LOOPSMITH_SANDBOX_PYTHON_IMAGE:-loopsmith/sandbox-python:local}"
  "${LOOPSMITH_SANDBOX_NODE_IMAGE:-loopsmith/sandbox-node:local}"
  "${LOOPSMITH_RUNTIME_IMAGE:-loopsmith/node-runtime:local}"
  "${LOOPSMITH_ENGINE_IMAGE:-loopsmith/engine:local}"
)
missing=0
for image in "${images[@]}"; do
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    # An official image name may be pulled where a registry answers.
    case "$image" in
      loopsmith/*) missing=1 ;;
      *) docker pull -q "$image" >/dev/null || missing=1 ;;
    esac
  fi
done
# An image of ours that is older than deploy/build-images.sh builds (its version label) is rebuilt.
[ "$missing" = 1 ] || bash deploy/build-images.sh --check >/dev/null || missing=1
if [ "$missing" = 1 ]; then
  echo "prepare: building images from Debian packages (deploy/build-images.sh)"
  if [ "$(id -u)" != "0" ]; then
    echo "prepare: building images needs root (debootstrap); run: sudo bash deploy/build-images.sh" >&2
    exit 1
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  fi
  bash deploy/build-images.sh
fi

# The look-alikes of SWE-bench's official instance images, one per shipped instance
# (tests/e2e/swe-bench-images.test.ts runs `bench --format swe-bench --images official` on
# them): Debian bookworm, built from packages, as the other images (about 2 min the first time).
if [ "$(id -u)" = "0" ]; then
  bash deploy/build-swebench-lookalike.sh examples/swe-bench/instances.jsonl examples/swe-bench/repos
elif ! docker image inspect loopsmith/swebench-lookalike-base:local >/dev/null 2>&1; then
  echo "prepare: the SWE-bench look-alike images need root (debootstrap); run: sudo bash deploy/build-swebench-lookalike.sh examples/swe-bench/instances.jsonl examples/swe-bench/repos" >&2
  exit 1
fi
