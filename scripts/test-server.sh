#!/usr/bin/env bash
# The server's tests with clients no one here wrote (called by scripts/test.sh): the official
# openai npm package, a bounded load / fault test and the chat page in Debian's chromium
# (playwright-core), all on loopback against a freshly made ds-tiny model, then nginx in front of
# two servers (scripts/serve-nginx.sh). Installs what it needs (apt: nodejs/npm if absent,
# chromium, nginx; npm ci).
#   scripts/test-server.sh [MOESPLIT_BIN]        (default build/release/apps/moesplit)
#   LOAD_REQUESTS / LOAD_CONCURRENCY tune the load test (500 / 16)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(realpath "${1:-$root/build/release/apps/moesplit}")"
[ -x "$bin" ] || { echo "test-server: no moesplit binary at $bin (build first)" >&2; exit 1; }

SUDO=""
[ "$(id -u)" != 0 ] && SUDO="sudo"
missing=()
command -v node >/dev/null || missing+=(nodejs npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if ((${#missing[@]})); then
  echo "test-server: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" make-model --preset ds-tiny -o "$work/ds-tiny.gguf" >/dev/null

cd "$root/tests/apps/server_js"
npm ci --no-audit --no-fund --loglevel=error
MOESPLIT_BIN="$bin" MOESPLIT_MODEL="$work/ds-tiny.gguf" \
  timeout 900 node --test --test-concurrency=1 openai.test.mjs load.test.mjs browser.test.mjs
timeout 300 "$root/scripts/serve-nginx.sh" "$bin" "$work/ds-tiny.gguf"
echo "test-server: ok"
