#!/usr/bin/env bash
# Installs the real parts the project runs against, only when they are missing:
# redis-server, prometheus and a Java 17+ runtime (for Spark). Safe to run any number of times.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v openssl >/dev/null 2>&1 || need+=(openssl)  # TLS certificates for the rediss:// test
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  need+=(openjdk-17-jre-headless)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
echo "setup: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian may start the packaged services; the project starts its own on loopback ports instead.
for svc in redis-server prometheus; do
  (command -v service >/dev/null 2>&1 && $SUDO service "$svc" stop >/dev/null 2>&1) || true
done
