# Sourced by deploy/build-images.sh and deploy/ensure-compose.sh: debian_mirror prints the
# first Debian mirror named in this host's own apt sources (deb822 or one-line format), so no
# mirror or registry host is ever written into the project. Returns 1 when there is none.
debian_mirror() {
  local uri=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | grep '/debian' | head -n1 || true)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list | awk '{for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' | grep -v -- '-security' | head -n1 || true)
  fi
  [ -n "$uri" ] || return 1
  echo "$uri"
}
