#!/usr/bin/env bash
# A second Docker engine on this machine, standing in for a remote GPU box in the remote
# host tests (tests/remote_host.rs): its own socket, data root, exec root and bridge
# (ns-br1, 10.231.0.1/24), so it shares nothing with the main engine but the kernel. It also
# listens on tcp://127.0.0.1:23760 with --tlsverify (a CA, server and client certificates
# made here with openssl; the client's in /tmp/NAME/tls/client). The stand-in images are
# copied into it (docker save | docker -H … load) when missing.
#
#   scripts/docker-host-up.sh [NAME]        start (idempotent); prints the unix:// URL, then
#                                           the tcp:// URL and the client certificate dir
#   scripts/docker-host-up.sh --stop [NAME] stop it (SIGTERM, then wait)
#
# Root only (a bridge and a daemon). NAME defaults to ns-d2.
set -euo pipefail
STOP=
if [ "${1:-}" = "--stop" ]; then STOP=1; shift; fi
NAME=${1:-ns-d2}
BASE=/tmp/$NAME
SOCK=$BASE.sock
PID=$BASE.pid
BR=ns-br1
if [ -n "$STOP" ]; then
  pid=$(cat "$PID" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: scripts/docker-host-up.sh starts dockerd: run it as root" >&2
  exit 2
fi
if ! ip link show "$BR" >/dev/null 2>&1; then
  ip link add "$BR" type bridge
  ip addr add 10.231.0.1/24 dev "$BR"
fi
ip link set "$BR" up
TLS=$BASE/tls
PORT=23760
if [ ! -s "$TLS/client/key.pem" ]; then
  mkdir -p "$TLS/client"
  ( cd "$TLS"
    q() { "$@" >/dev/null 2>&1; }
    q openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=nightshift test CA" -keyout ca-key.pem -out ca.pem
    q openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server-key.pem -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
    q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile server.ext -out server-cert.pem
    q openssl req -newkey rsa:2048 -nodes -subj "/CN=nightshift" -keyout client/key.pem -out client.csr
    printf 'extendedKeyUsage=clientAuth\n' > client.ext
    q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile client.ext -out client/cert.pem
    cp ca.pem client/ca.pem
    chmod 600 ca-key.pem server-key.pem client/key.pem )
fi
if ! { [ -f "$PID" ] && kill -0 "$(cat "$PID")" 2>/dev/null; }; then
  mkdir -p "$BASE/data" "$BASE/exec"
  # Its own (empty) config file: /etc/docker/daemon.json belongs to the main engine.
  echo '{}' > "$BASE.json"
  nohup dockerd --config-file "$BASE.json" --host "unix://$SOCK" --host "tcp://127.0.0.1:$PORT" \
    --tlsverify --tlscacert "$TLS/ca.pem" --tlscert "$TLS/server-cert.pem" --tlskey "$TLS/server-key.pem" \
    --data-root "$BASE/data" \
    --exec-root "$BASE/exec" --pidfile "$PID" --bridge "$BR" --iptables=false --ip-masq=false \
    >"$BASE.log" 2>&1 &
  for _ in $(seq 1 100); do docker -H "unix://$SOCK" info >/dev/null 2>&1 && break; sleep 0.2; done
fi
docker -H "unix://$SOCK" info >/dev/null 2>&1 || { echo "error: $NAME did not start; see $BASE.log" >&2; exit 1; }
# The stand-in images, copied over when this engine lacks them or has older ones.
IMAGES=${NIGHTSHIFT_HOST_IMAGES:-"nightshift-standin:latest nightshift-standin:oom"}
for img in $IMAGES; do
  want=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null || true)
  [ -n "$want" ] || continue
  have=$(docker -H "unix://$SOCK" image inspect -f '{{.Id}}' "$img" 2>/dev/null || true)
  if [ "$want" != "$have" ]; then
    docker save "$img" | docker -H "unix://$SOCK" load -q >/dev/null
  fi
done
echo "unix://$SOCK"
echo "tcp://127.0.0.1:$PORT $TLS/client"
