#!/usr/bin/env bash
# Debian's chromium for the browser tests (Playwright drives it; it never downloads one).
set -euo pipefail
if [ -x /usr/bin/chromium ] && /usr/bin/chromium --version >/dev/null 2>&1; then
  echo "chromium: $(/usr/bin/chromium --version)"
  exit 0
fi
echo "installing Debian's chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq > /tmp/ci-apt.log 2>&1 || { tail -20 /tmp/ci-apt.log; exit 1; }
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >> /tmp/ci-apt.log 2>&1 \
  || { tail -20 /tmp/ci-apt.log; exit 1; }
echo "chromium: $(/usr/bin/chromium --version)"
