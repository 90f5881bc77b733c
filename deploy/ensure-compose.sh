#!/usr/bin/env bash
# Make sure `docker compose` (the Compose v2 CLI plugin) works on this machine, and print
# its version. Quick when it is already there.
#
# Debian bookworm ships only Compose v1 (`docker-compose`, Python); v2 is packaged in trixie.
# When `docker compose version` fails, this downloads trixie's docker-compose package with
# apt, against a sources list of its own (its own lists and cache under a temporary folder,
# so the host's apt state is untouched), unpacks it with `dpkg -x` and installs its plugin
# binary as ~/.docker/cli-plugins/docker-compose. The mirror is read from this host's own
# apt sources (never written here). Needs root (apt) and a mirror that answers.
set -euo pipefail

if docker compose version >/dev/null 2>&1; then
  docker compose version
  exit 0
fi

if [ "$(id -u)" != "0" ]; then
  echo "ensure-compose: docker compose is missing and only root can fetch it with apt" >&2
  exit 1
fi

# shellcheck source=deploy/debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"
mirror() {
  debian_mirror || { echo "ensure-compose: no Debian mirror found in /etc/apt/sources*" >&2; exit 1; }
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/deb"
m=$(mirror)
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m trixie main" >"$work/sources.list"
apt_opts=(
  -o "Dir::Etc::sourcelist=$work/sources.list"
  -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache"
  -o "APT::Get::List-Cleanup=0"
)
echo "ensure-compose: fetching Compose v2 from Debian trixie ($m)" >&2
apt-get "${apt_opts[@]}" update -q >"$work/apt.log" 2>&1 || { tail -n 20 "$work/apt.log" >&2; exit 1; }
(cd "$work/deb" && apt-get "${apt_opts[@]}" download docker-compose >>"$work/apt.log" 2>&1) || {
  tail -n 20 "$work/apt.log" >&2; exit 1; }
deb=$(ls "$work"/deb/docker-compose_*.deb)
dpkg -x "$deb" "$work/root"
plugin="$work/root/usr/libexec/docker/cli-plugins/docker-compose"
[ -x "$plugin" ] || { echo "ensure-compose: $(basename "$deb") has no cli-plugins/docker-compose" >&2; exit 1; }
install -d -m 0755 "$HOME/.docker/cli-plugins"
install -m 0755 "$plugin" "$HOME/.docker/cli-plugins/docker-compose"
docker compose version
