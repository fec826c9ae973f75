#!/usr/bin/env bash
# Installs the real parts the project runs against, only when they are missing:
# redis-server, prometheus (with promtool), a Java 17+ runtime (for Spark), Node with the Kinesis emulator
# (kinesis-local, from npm, into .tools/), and libfaketime (the tests move the emulator's clock on to
# expire a shard iterator). Safe to run any number of times.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KINESIS_LOCAL=kinesis-local@0.6.2  # the npm build of kinesis-mock: faithful lineage and ChildShards

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# promtool (Debian's prometheus ships it) writes past days into a test's Prometheus
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need+=(prometheus)
command -v openssl >/dev/null 2>&1 || need+=(openssl)  # TLS certificates for the rediss:// test
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  need+=(openjdk-17-jre-headless)
fi
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null || need+=(libfaketime)

install_kinesis() {
  [ -f "$ROOT/.tools/node_modules/kinesis-local/main.js" ] && return 0
  echo "setup: installing $KINESIS_LOCAL into .tools/"
  mkdir -p "$ROOT/.tools"
  npm install --silent --no-audit --no-fund --prefix "$ROOT/.tools" "$KINESIS_LOCAL" >/dev/null
}

if [ ${#need[@]} -eq 0 ]; then install_kinesis; exit 0; fi

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
echo "setup: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian may start the packaged services; the project starts its own on loopback ports instead.
for svc in redis-server prometheus; do
  (command -v service >/dev/null 2>&1 && $SUDO service "$svc" stop >/dev/null 2>&1) || true
done
install_kinesis
