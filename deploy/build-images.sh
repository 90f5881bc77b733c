#!/usr/bin/env bash
# Build loopsmith's images from Debian packages, for machines where no container registry
# answers: debootstrap Debian's trixie suite into a folder, install the packages an image
# needs in a chroot, then `docker import` the folder with its entry point and user.
#
# The mirror is read from this host's own apt sources (never written here).
# Image names come from the environment (the same names loopsmith's configuration reads):
#   LOOPSMITH_NATS_IMAGE             default loopsmith/nats:local            (nats-server 2.10, JetStream)
#   LOOPSMITH_POSTGRES_IMAGE         default loopsmith/postgres:local        (PostgreSQL 17 + pgvector 0.8)
#   LOOPSMITH_SANDBOX_PYTHON_IMAGE   default loopsmith/sandbox-python:local  (python3, pytest, hypothesis)
#   LOOPSMITH_SANDBOX_NODE_IMAGE     default loopsmith/sandbox-node:local    (nodejs, npm, the metrics' ESLint)
#   LOOPSMITH_RUNTIME_IMAGE          default loopsmith/node-runtime:local    (nodejs only: the app image's base)
#   LOOPSMITH_ENGINE_IMAGE           default loopsmith/engine:local          (a Docker engine with mutual TLS:
#                                    executors on several engines; runs privileged)
# Usage: deploy/build-images.sh [--force] [nats|postgres|python|node|runtime|engine ...]
# An image that already exists is kept unless --force is given. Needs root and debootstrap.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work="${LOOPSMITH_ROOTFS_DIR:-/var/tmp/loopsmith-rootfs}"
suite=trixie
force=0
check=0
wanted=()
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --check) check=1 ;;
    nats|postgres|python|node|runtime|engine) wanted+=("$arg") ;;
    *) echo "build-images: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ ${#wanted[@]} -gt 0 ] || wanted=(nats postgres python node runtime engine)

NATS_IMAGE="${LOOPSMITH_NATS_IMAGE:-loopsmith/nats:local}"
POSTGRES_IMAGE="${LOOPSMITH_POSTGRES_IMAGE:-loopsmith/postgres:local}"
PYTHON_IMAGE="${LOOPSMITH_SANDBOX_PYTHON_IMAGE:-loopsmith/sandbox-python:local}"
NODE_IMAGE="${LOOPSMITH_SANDBOX_NODE_IMAGE:-loopsmith/sandbox-node:local}"
RUNTIME_IMAGE="${LOOPSMITH_RUNTIME_IMAGE:-loopsmith/node-runtime:local}"
ENGINE_IMAGE="${LOOPSMITH_ENGINE_IMAGE:-loopsmith/engine:local}"

# shellcheck source=deploy/debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"
mirror() {
  debian_mirror || { echo "build-images: no Debian mirror found in /etc/apt/sources*" >&2; exit 1; }
}

# The content version of each image, as its org.loopsmith.version label says (an image built
# before the label existed is version 1). A present image of an older version is rebuilt.
# python 2: python3-pip (repo mode's setup phase); node 2: npm (`npm test`, `npm ci`).
# python 3: python3-pytest-xdist and the verdict plugin (loopsmith_verdict.py); node 3: the verdict reporter.
# python 4: the quality metrics' tools of `improve` without --bench: python3-coverage,
# pyflakes3, mypy, radon, bandit. python 5: the verdict plugin forks its worker (no xdist worker per run).
# python 6: the verdict plugin's worker checks that each test runs the code it was collected with.
# python 7: the verdict plugin compiled in the image (a .pyc: no compile per run). python 8: replayed
# skip reports keep their tuples (JUnit needs them). python 9: the plugin is inert under pytest < 7.
# node 4: the JavaScript/TypeScript quality metrics' analysers in /opt/loopsmith/metrics (ESLint,
# typescript-eslint, eslint-plugin-security: complexity, security, and the default lint), and
# libnss-myhostname (`localhost` resolves in a sandbox, whose /etc/hosts is empty: vitest needs it).
declare -A VERSION=([nats]=1 [postgres]=1 [python]=9 [node]=4 [runtime]=1 [engine]=1)
kind_of() {
  case "$1" in
    "$NATS_IMAGE") echo nats ;; "$POSTGRES_IMAGE") echo postgres ;;
    "$PYTHON_IMAGE") echo python ;; "$NODE_IMAGE") echo node ;; "$RUNTIME_IMAGE") echo runtime ;;
    "$ENGINE_IMAGE") echo engine ;;
  esac
}
need_image() {
  [ "$force" = 1 ] && return 0
  docker image inspect "$1" >/dev/null 2>&1 || return 0
  local have; have=$(docker image inspect -f '{{ index .Config.Labels "org.loopsmith.version" }}' "$1" 2>/dev/null)
  [ -n "$have" ] && [ "$have" != "<no value>" ] || have=1
  [ "$have" != "${VERSION[$(kind_of "$1")]}" ]
}

ensure_debootstrap() {
  command -v debootstrap >/dev/null 2>&1 && return 0
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
}

# A minimal trixie root file system, made once and copied for every image.
base_rootfs() {
  if [ ! -f "$work/base/.complete" ]; then
    ensure_debootstrap
    rm -rf "$work/base"
    mkdir -p "$work"
    local m; m=$(mirror)
    echo "build-images: debootstrap $suite from $m"
    debootstrap --variant=minbase "$suite" "$work/base" "$m" >"$work/debootstrap.log" 2>&1 || {
      tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
    printf '#!/bin/sh\nexit 101\n' >"$work/base/usr/sbin/policy-rc.d"
    chmod +x "$work/base/usr/sbin/policy-rc.d"
    touch "$work/base/.complete"
  fi
}

# rootfs NAME PACKAGES...: copy the base and install packages into it; prints the folder.
rootfs() {
  local name=$1; shift
  local dir="$work/$name"
  rm -rf "$dir"
  cp -a "$work/base" "$dir"
  rm -f "$dir/.complete"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  chroot "$dir" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  chroot "$dir" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "$@" >"$work/$name.apt.log" 2>&1 || {
      tail -n 30 "$work/$name.apt.log" >&2; exit 1; }
  # A sandbox user with a fixed uid, the same in every image.
  chroot "$dir" /usr/sbin/useradd --uid 10001 --user-group --create-home --shell /bin/sh sandbox 2>/dev/null || true
  chroot "$dir" apt-get clean
  rm -rf "$dir/var/lib/apt/lists/"* "$dir/var/cache/apt/"*.bin "$dir/usr/share/doc" "$dir/usr/share/man"
  : >"$dir/etc/resolv.conf"
}

# import NAME IMAGE CHANGES...: docker import the folder with its Dockerfile-style changes.
import() {
  local name=$1 image=$2; shift 2
  local args=()
  for c in "$@"; do args+=(--change "$c"); done
  args+=(--change "LABEL org.loopsmith.version=${VERSION[$name]}")
  tar -C "$work/$name" -c . | docker import "${args[@]}" - "$image" >/dev/null
  rm -rf "${work:?}/$name"
  echo "build-images: built $image"
}

build_nats() {
  need_image "$NATS_IMAGE" || { echo "build-images: $NATS_IMAGE exists"; return; }
  rootfs nats nats-server ca-certificates
  mkdir -p "$work/nats/data"
  import nats "$NATS_IMAGE" 'ENTRYPOINT ["/usr/sbin/nats-server"]' 'CMD ["-js", "-sd", "/data", "-m", "8222"]' \
    'EXPOSE 4222 8222' 'LABEL org.loopsmith.image=nats'
}

build_postgres() {
  need_image "$POSTGRES_IMAGE" || { echo "build-images: $POSTGRES_IMAGE exists"; return; }
  rootfs postgres postgresql-17 postgresql-17-pgvector locales-all
  install -m 0755 "$here/rootfs/postgres-entrypoint.sh" "$work/postgres/usr/local/bin/postgres-entrypoint"
  rm -rf "$work/postgres/var/lib/postgresql/17" "$work/postgres/etc/postgresql/17"
  mkdir -p "$work/postgres/var/lib/postgresql/data"
  chroot "$work/postgres" chown -R postgres:postgres /var/lib/postgresql
  import postgres "$POSTGRES_IMAGE" 'USER postgres' 'ENV PGDATA=/var/lib/postgresql/data' \
    'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]' 'EXPOSE 5432' 'LABEL org.loopsmith.image=postgres'
}

build_python() {
  need_image "$PYTHON_IMAGE" || { echo "build-images: $PYTHON_IMAGE exists"; return; }
  # loopsmith_verdict.py: the pytest plugin every test command loads; it forks the worker that
  # runs the tests, and the verdict is the controller's (docs/SANDBOX.md). python3-pytest-xdist
  # stays for repositories whose own configuration runs their tests with `-n`.
  # python3-coverage, pyflakes3, mypy, radon, bandit: the quality metrics `improve` measures when it
  # is given no --bench (services/architect/src/improve/metrics.ts, docs/USAGE.md).
  rootfs python python3 python3-pytest python3-pytest-xdist python3-hypothesis python3-pip \
    python3-coverage pyflakes3 mypy radon bandit
  install -m 0644 "$here/rootfs/sandbox-python/loopsmith_verdict.py" "$work/python/usr/lib/python3/dist-packages/"
  # Compiled once here: every run reads the .pyc (runs write none, -B), not 600 lines compiled again.
  chroot "$work/python" python3 -m py_compile /usr/lib/python3/dist-packages/loopsmith_verdict.py
  import python "$PYTHON_IMAGE" 'USER 10001:10001' 'WORKDIR /workspace' 'ENV PYTHONDONTWRITEBYTECODE=1' \
    'CMD ["python3"]' 'LABEL org.loopsmith.image=sandbox-python'
}

# node_metrics_tools ROOT: the analysers loopsmith's own JavaScript/TypeScript metrics run
# (complexity, security, lint without the repository's eslint), installed with `npm ci` from
# rootfs/sandbox-node/metrics (its package-lock.json pins every version) into /opt/loopsmith/metrics.
# Debian packages no ESLint plugin, so they come from the npm registry, reached from the chroot
# with this host's DNS, proxy settings and CA bundle (a TLS-inspecting proxy signs with a CA only
# the host's bundle has); all three are removed again before the import. No install scripts run.
node_metrics_tools() {
  local root=$1 dir=/opt/loopsmith/metrics
  install -d -m 0755 "$root$dir"
  install -m 0644 "$here/rootfs/sandbox-node/metrics/package.json" "$here/rootfs/sandbox-node/metrics/package-lock.json" \
    "$here/rootfs/sandbox-node/metrics/eslint.config.mjs" "$root$dir/"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  local env=(HOME=/tmp/npm-home npm_config_update_notifier=false)
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$root/tmp/host-ca.crt"
    env+=(NODE_EXTRA_CA_CERTS=/tmp/host-ca.crt npm_config_cafile=/tmp/host-ca.crt)
  fi
  local v
  for v in npm_config_registry https_proxy HTTPS_PROXY http_proxy HTTP_PROXY no_proxy NO_PROXY; do
    [ -n "${!v:-}" ] && env+=("$v=${!v}")
  done
  chroot "$root" /usr/bin/env "${env[@]}" npm ci --prefix "$dir" --omit=dev --ignore-scripts --no-audit --no-fund \
    >"$work/node-metrics.npm.log" 2>&1 || { tail -n 30 "$work/node-metrics.npm.log" >&2; exit 1; }
  [ -f "$root$dir/node_modules/eslint/bin/eslint.js" ] || { echo "build-images: npm ci did not install eslint" >&2; exit 1; }
  rm -rf "$root/tmp/npm-home" "$root/tmp/host-ca.crt"
  : >"$root/etc/resolv.conf"
}

build_node() {
  need_image "$NODE_IMAGE" || { echo "build-images: $NODE_IMAGE exists"; return; }
  # node-typescript: TypeScript runs with no build step through module hooks
  # (node --import /opt/loopsmith/ts-register.mjs), types erased by transpileModule.
  # /opt/loopsmith/metrics: the quality metrics' ESLint (node_metrics_tools above).
  # libnss-myhostname: a sandbox run has no network, so the engine leaves its /etc/hosts empty;
  # this NSS module (its install adds it to nsswitch.conf's hosts line) still resolves
  # `localhost`, which vite, and so vitest, looks up as it starts.
  rootfs node nodejs node-typescript npm libnss-myhostname
  grep -q '^hosts:.*myhostname' "$work/node/etc/nsswitch.conf" || {
    echo "build-images: libnss-myhostname is not in nsswitch.conf's hosts line" >&2; exit 1; }
  local ts; ts=$(cd "$work/node" && ls usr/share/nodejs/typescript/lib/typescript.js 2>/dev/null || true)
  [ -n "$ts" ] || { echo "build-images: node-typescript did not install typescript.js" >&2; exit 1; }
  install -d -m 0755 "$work/node/opt/loopsmith"
  install -m 0644 "$here/rootfs/sandbox-node/ts-register.mjs" "$here/rootfs/sandbox-node/ts-hooks.mjs" "$here/rootfs/sandbox-node/verdict-reporter.mjs" "$work/node/opt/loopsmith/"
  node_metrics_tools "$work/node"
  import node "$NODE_IMAGE" 'USER 10001:10001' 'WORKDIR /workspace' 'CMD ["node"]' \
    'LABEL org.loopsmith.image=sandbox-node'
}

# The application image's base: Node.js and CA certificates, nothing else (no npm, no shell
# tools beyond the base's, no documentation or translations), so the app image stays small.
build_runtime() {
  need_image "$RUNTIME_IMAGE" || { echo "build-images: $RUNTIME_IMAGE exists"; return; }
  rootfs runtime nodejs ca-certificates
  rm -rf "$work/runtime/usr/share/locale" "$work/runtime/usr/share/info" "$work/runtime/usr/share/i18n" \
    "$work/runtime/usr/share/zoneinfo" "$work/runtime/var/cache/debconf/"*-old "$work/runtime/var/log/"*
  import runtime "$RUNTIME_IMAGE" 'CMD ["node"]' 'LABEL org.loopsmith.image=node-runtime'
}

# A Docker engine (dockerd, containerd, runc) that listens on TCP with mutual TLS only
# (rootfs/engine-entrypoint.sh makes the certificates); run privileged, /var/lib/docker on a volume.
build_engine() {
  need_image "$ENGINE_IMAGE" || { echo "build-images: $ENGINE_IMAGE exists"; return; }
  # docker-cli: the entry point asks the engine whether it answers yet.
  rootfs engine docker.io docker-cli iptables openssl ca-certificates
  rm -rf "$work/engine/usr/share/locale" "$work/engine/usr/share/zoneinfo" "$work/engine/var/log/"*
  install -m 0755 "$here/rootfs/engine-entrypoint.sh" "$work/engine/usr/local/bin/engine-entrypoint"
  import engine "$ENGINE_IMAGE" 'ENTRYPOINT ["/usr/local/bin/engine-entrypoint"]' 'VOLUME ["/var/lib/docker"]' \
    'EXPOSE 2376' 'LABEL org.loopsmith.image=engine'
}

if [ "$check" = 1 ]; then
  # --check: exit 1 when an image is missing or older than this script builds (no root needed).
  for w in "${wanted[@]}"; do
    case "$w" in nats) i=$NATS_IMAGE ;; postgres) i=$POSTGRES_IMAGE ;; python) i=$PYTHON_IMAGE ;; node) i=$NODE_IMAGE ;; runtime) i=$RUNTIME_IMAGE ;; engine) i=$ENGINE_IMAGE ;; esac
    case "$i" in loopsmith/*) ;; *) continue ;; esac
    if need_image "$i"; then echo "build-images: $i is missing or out of date"; exit 1; fi
  done
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "build-images: must run as root (debootstrap and chroot)" >&2
  exit 1
fi
todo=()
for w in "${wanted[@]}"; do
  case "$w" in
    nats) need_image "$NATS_IMAGE" && todo+=(nats) ;;
    postgres) need_image "$POSTGRES_IMAGE" && todo+=(postgres) ;;
    python) need_image "$PYTHON_IMAGE" && todo+=(python) ;;
    node) need_image "$NODE_IMAGE" && todo+=(node) ;;
    runtime) need_image "$RUNTIME_IMAGE" && todo+=(runtime) ;;
    engine) need_image "$ENGINE_IMAGE" && todo+=(engine) ;;
  esac
done
if [ ${#todo[@]} -eq 0 ]; then echo "build-images: all images present"; exit 0; fi
base_rootfs
for w in "${todo[@]}"; do "build_$w"; done
