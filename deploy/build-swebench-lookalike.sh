#!/usr/bin/env bash
# Look-alikes of SWE-bench's official instance images, built from Debian packages, for the
# tests of `bench --format swe-bench --images official` on a machine that reaches no registry.
# Each has the official layout:
#   - Debian bookworm, so its Python (3.11) is not the sandbox image's (3.13);
#   - an environment `testbed` under /opt/miniconda3/envs/ (a venv) with pytest installed there
#     and only there (Debian's pytest packages unpacked into it, not into the system Python);
#   - /opt/miniconda3/bin/activate, which defines `conda activate <env>`;
#   - /testbed holding the repository with its whole history, the fix commit included (the
#     official images' .git holds commits after base_commit), checked out at base_commit;
#   - root as the default user;
# tagged with the official name of each instance (swebench/sweb.eval.x86_64.<id>:latest, `__`
# as `_1776_`, lower case). Usage, as root (debootstrap):
#   deploy/build-swebench-lookalike.sh <instances.jsonl> <repos dir>
# <repos dir> holds <owner>__<name>.bundle (or a clone) of each instance's repository.
# Idempotent: an image of the current version is kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/debian-mirror.sh
. "$here/debian-mirror.sh"

instances=${1:?usage: build-swebench-lookalike.sh <instances.jsonl> <repos dir>}
repos=${2:?usage: build-swebench-lookalike.sh <instances.jsonl> <repos dir>}
VERSION=1
BASE_IMAGE=loopsmith/swebench-lookalike-base:local
work=${LOOPSMITH_BUILD_DIR:-/var/tmp/loopsmith-swebench-build}

current() {
  [ "$(docker image inspect -f '{{ index .Config.Labels "org.loopsmith.version" }}' "$1" 2>/dev/null || true)" = "$VERSION" ]
}

build_base() {
  current "$BASE_IMAGE" && return 0
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  }
  local mirror dir="$work/base"
  mirror=$(debian_mirror) || { echo "build-swebench-lookalike: no Debian mirror in /etc/apt/sources*" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$work"
  echo "build-swebench-lookalike: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase --include=python3,python3-venv,git,ca-certificates bookworm "$dir" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  # The environment: a venv (no pip: nothing is installed from PyPI), and pytest's Debian
  # packages unpacked into its site-packages only.
  chroot "$dir" python3 -m venv --without-pip /opt/miniconda3/envs/testbed
  chroot "$dir" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  chroot "$dir" sh -c 'mkdir -p /tmp/debs && cd /tmp/debs &&
    apt-get download -q python3-pytest python3-pluggy python3-iniconfig python3-packaging python3-attr >/dev/null &&
    for d in *.deb; do dpkg-deb -x "$d" /tmp/debs/x; done'
  local site
  site=$(cd "$dir" && ls -d opt/miniconda3/envs/testbed/lib/python3*/site-packages)
  cp -r "$dir/tmp/debs/x/usr/lib/python3/dist-packages/." "$dir/$site/"
  rm -rf "$dir/tmp/debs" "$dir/var/lib/apt/lists/"* "$dir/usr/share/doc" "$dir/usr/share/man"
  # Files, not links: a link to an absolute path would name the host's file while building.
  printf '#!/opt/miniconda3/envs/testbed/bin/python\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n' \
    >"$dir/opt/miniconda3/envs/testbed/bin/pytest"
  chmod 0755 "$dir/opt/miniconda3/envs/testbed/bin/pytest"
  mkdir -p "$dir/opt/miniconda3/bin"
  cat >"$dir/opt/miniconda3/bin/activate" <<'ACTIVATE'
# A look-alike of conda's activate script (loopsmith's test images): defines `conda activate <env>`,
# which puts the environment's bin first on PATH, as conda does.
conda() {
  if [ "${1:-}" = activate ] && [ -d "/opt/miniconda3/envs/${2:-}" ]; then
    export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX="/opt/miniconda3/envs/$2"
    export PATH="/opt/miniconda3/envs/$2/bin:$PATH"
  else
    echo "conda: only 'conda activate <env>' is supported here" >&2
    return 1
  fi
}
ACTIVATE
  mkdir -p "$dir/testbed"
  : >"$dir/etc/resolv.conf"
  tar -C "$dir" -c . | docker import --change 'WORKDIR /testbed' --change 'CMD ["/bin/bash"]' \
    --change "LABEL org.loopsmith.version=$VERSION" --change 'LABEL org.loopsmith.image=swebench-lookalike' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$dir"
  echo "build-swebench-lookalike: built $BASE_IMAGE"
}

# One image per instance: the base with /testbed (the repository at base_commit, and the fix
# as a later commit on a branch).
build_instance() {
  local id=$1 repo=$2 base=$3 patchfile=$4 testpatchfile=$5
  local image
  image=$(printf 'swebench/sweb.eval.x86_64.%s:latest' "${id//__/_1776_}" | tr '[:upper:]' '[:lower:]')
  current "$image" && { echo "build-swebench-lookalike: $image exists"; return 0; }
  local src="$repos/${repo/\//__}"
  [ -e "$src.bundle" ] && src="$src.bundle"
  [ -e "$src" ] || [ -e "$src.git" ] || { echo "build-swebench-lookalike: no repository for $repo in $repos" >&2; exit 1; }
  [ -e "$src" ] || src="$src.git"
  local tree="$work/$id"
  rm -rf "$tree"
  git clone -q "$src" "$tree"
  git -C "$tree" remote remove origin
  git -C "$tree" checkout -q -b fix "$base"
  git -C "$tree" apply "$patchfile" "$testpatchfile"
  git -C "$tree" add -A
  git -C "$tree" -c user.name=upstream -c user.email=upstream@example.invalid commit -q -m "the fix of $id"
  git -C "$tree" checkout -q --detach "$base"
  local ctr
  ctr=$(docker create "$BASE_IMAGE")
  docker cp "$tree/." "$ctr:/testbed"
  docker commit --change "LABEL org.loopsmith.version=$VERSION" --change 'LABEL org.loopsmith.image=swebench-lookalike' \
    "$ctr" "$image" >/dev/null
  docker rm -f "$ctr" >/dev/null
  rm -rf "$tree"
  echo "build-swebench-lookalike: built $image"
}

build_base
mkdir -p "$work"
# instance_id, repo, base_commit and the two patches of each line, through node (always here).
node -e '
  const fs = require("fs"), path = require("path");
  const [file, dir] = process.argv.slice(1);
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const i = JSON.parse(line);
    fs.writeFileSync(path.join(dir, i.instance_id + ".patch"), i.patch);
    fs.writeFileSync(path.join(dir, i.instance_id + ".test.patch"), i.test_patch);
    console.log([i.instance_id, i.repo, i.base_commit].join(" "));
  }' "$instances" "$work" | while read -r id repo base; do
  build_instance "$id" "$repo" "$base" "$work/$id.patch" "$work/$id.test.patch"
  rm -f "$work/$id.patch" "$work/$id.test.patch"
done
