#!/bin/sh
# Entry point of loopsmith's Docker engine image: a Docker engine in a privileged
# container, for running executors on several engines on one machine (compose.cluster.yml,
# the engine tests). It listens on TCP 2376 with mutual TLS only, never plain TCP.
#
# Certificates: made on first start under $ENGINE_CERT_DIR (default /certs, put it on a
# volume): ca/ (this engine's own CA; its key never leaves the folder), server/ (for the
# names in $ENGINE_TLS_NAMES plus the container's hostname and localhost) and client/ (the
# key, certificate and CA an executor needs: DOCKER_CERT_PATH=<mount>/client,
# DOCKER_TLS_VERIFY=1). Anyone holding client/ has root on this engine: mount it only into
# the one executor that drives it.
#
# Images: the engine starts empty. The executor that drives it loads the sandbox images from
# a `docker save` archive (LOOPSMITH_SANDBOX_IMAGES), or stops at start naming what is missing.
set -eu
CERTS="${ENGINE_CERT_DIR:-/certs}"
DAYS="${ENGINE_TLS_DAYS:-825}"
host=$(hostname)

make_certs() {
  umask 077
  mkdir -p "$CERTS/ca" "$CERTS/server" "$CERTS/client"
  openssl genrsa -out "$CERTS/ca/key.pem" 3072 2>/dev/null
  openssl req -new -x509 -key "$CERTS/ca/key.pem" -days "$DAYS" -subj "/CN=loopsmith engine CA $host" \
    -out "$CERTS/ca/cert.pem"
  san="DNS:$host,DNS:localhost,IP:127.0.0.1"
  for n in ${ENGINE_TLS_NAMES:-}; do san="$san,DNS:$n"; done
  openssl genrsa -out "$CERTS/server/key.pem" 3072 2>/dev/null
  openssl req -new -key "$CERTS/server/key.pem" -subj "/CN=$host" -out "$CERTS/server/csr.pem"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >"$CERTS/server/ext.cnf"
  openssl x509 -req -in "$CERTS/server/csr.pem" -CA "$CERTS/ca/cert.pem" -CAkey "$CERTS/ca/key.pem" \
    -CAcreateserial -days "$DAYS" -extfile "$CERTS/server/ext.cnf" -out "$CERTS/server/cert.pem" 2>/dev/null
  openssl genrsa -out "$CERTS/client/key.pem" 3072 2>/dev/null
  openssl req -new -key "$CERTS/client/key.pem" -subj "/CN=loopsmith executor" -out "$CERTS/client/csr.pem"
  printf 'extendedKeyUsage=clientAuth\n' >"$CERTS/client/ext.cnf"
  openssl x509 -req -in "$CERTS/client/csr.pem" -CA "$CERTS/ca/cert.pem" -CAkey "$CERTS/ca/key.pem" \
    -CAcreateserial -days "$DAYS" -extfile "$CERTS/client/ext.cnf" -out "$CERTS/client/cert.pem" 2>/dev/null
  cp "$CERTS/ca/cert.pem" "$CERTS/server/ca.pem"
  cp "$CERTS/ca/cert.pem" "$CERTS/client/ca.pem"
  rm -f "$CERTS"/*/csr.pem "$CERTS"/*/ext.cnf
  # The executor runs as another user than root: it must read its client files.
  chmod 0755 "$CERTS" "$CERTS/client"
  chmod 0644 "$CERTS/client/"*.pem
  touch "$CERTS/.complete"
}
[ -f "$CERTS/.complete" ] || make_certs

# A stale pid file of a killed engine stops the next start.
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid /var/run/engine-ready
dockerd --host=unix:///var/run/docker.sock --host=tcp://0.0.0.0:2376 \
  --tlsverify --tlscacert="$CERTS/server/ca.pem" --tlscert="$CERTS/server/cert.pem" --tlskey="$CERTS/server/key.pem" \
  "$@" &
engine=$!
trap 'kill -TERM "$engine" 2>/dev/null; wait "$engine"; exit $?' TERM INT

i=0
until docker version >/dev/null 2>&1; do
  if ! kill -0 "$engine" 2>/dev/null; then echo "engine-entrypoint: dockerd exited" >&2; wait "$engine"; exit 1; fi
  i=$((i + 1)); [ "$i" -lt 600 ] || { echo "engine-entrypoint: dockerd did not answer in 60 s" >&2; exit 1; }
  sleep 0.1
done
touch /var/run/engine-ready
echo "engine-entrypoint: engine ready"
wait "$engine"
