#!/usr/bin/env bash
# Scale-out check on loopback: nginx (configs/nginx/moesplit.conf) in front of two
# `moesplit serve` instances. A two-turn conversation with one X-Conversation-Id must land on one
# backend both times and reuse its cached prefix on the second turn; a second conversation may
# land anywhere; with one backend stopped, requests still succeed (passive health checks).
#   scripts/serve-nginx.sh [MOESPLIT_BIN] MODEL
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build/release/apps/moesplit}"
model="${2:?usage: serve-nginx.sh BIN MODEL}"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "serve-nginx: nginx is not installed" >&2; exit 1; }
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

work="$(mktemp -d)"
pids=()
cleanup() {
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
a=$(free_port); b=$(free_port); front=$(free_port)
for port in "$a" "$b"; do
  "$bin" serve -m "$model" --host 127.0.0.1 --port "$port" -np 2 -c 2048 -t 1 --alias "backend-$port" \
    2>"$work/serve-$port.log" &
  pids+=($!)
done
for port in "$a" "$b"; do
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$work/serve-$port.log"; exit 1; }
done
sed -e "s|@PORT@|$front|; s|@BACKEND_A@|127.0.0.1:$a|; s|@BACKEND_B@|127.0.0.1:$b|; s|@PREFIX@|$work|g" \
  "$root/configs/nginx/moesplit.conf" > "$work/nginx.conf"
"$nginx_bin" -c "$work/nginx.conf" -p "$work" -e "$work/error.log"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$front/health" >/dev/null && break; sleep 0.1; done

# ask CONVERSATION_ID JSON_MESSAGES -> prints "model cached_tokens" of the answer
ask() {
  curl -sf "http://127.0.0.1:$front/v1/chat/completions" -H "X-Conversation-Id: $1" \
    -d "{\"messages\": $2, \"max_tokens\": 16, \"temperature\": 0}" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["model"], r["usage"]["prompt_tokens_details"]["cached_tokens"]); print(json.dumps(r["choices"][0]["message"]["content"]))'
}
history='[{"role": "system", "content": "'"$(printf 'You answer questions about rivers and lakes. %.0s' $(seq 12))"'"}, {"role": "user", "content": "Name a long river."}]'
out1=$(ask conv-1 "$history"); model1=$(echo "$out1" | sed -n 1p | cut -d' ' -f1)
answer=$(echo "$out1" | tail -1)
turn2="${history%]}, {\"role\": \"assistant\", \"content\": $answer}, {\"role\": \"user\", \"content\": \"And a short one?\"}]"
out2=$(ask conv-1 "$turn2"); model2=$(echo "$out2" | sed -n 1p | cut -d' ' -f1); cached2=$(echo "$out2" | sed -n 1p | cut -d' ' -f2)
echo "serve-nginx: turn 1 on $model1, turn 2 on $model2 with $cached2 cached prompt tokens"
[ "$model1" = "$model2" ] || { echo "serve-nginx: the conversation moved between backends" >&2; exit 1; }
[ "$cached2" -gt 0 ] || { echo "serve-nginx: the second turn reused no cached prefix" >&2; exit 1; }

# Other conversations spread over both backends (consistent hashing, 12 ids).
seen=$(for i in $(seq 12); do ask "other-$i" '[{"role": "user", "content": "hi"}]' | sed -n 1p | cut -d' ' -f1; done | sort -u | wc -l)
echo "serve-nginx: 12 conversations on $seen backend(s)"
[ "$seen" -eq 2 ] || { echo "serve-nginx: hashing sent every conversation to one backend" >&2; exit 1; }

# One backend down: its conversations fail over to the other.
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
for i in $(seq 6); do ask "other-$i" '[{"role": "user", "content": "hi"}]' >/dev/null; done
echo "serve-nginx: with backend $a stopped, 6 conversations still answered"
echo "serve-nginx: ok"
