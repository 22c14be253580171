#!/usr/bin/env python3
"""Prints llama.cpp's renderings of DeepSeek-V3.1 conversations (the expected strings of
tests/core/chat/chat_llamacpp_test.cc), from llama-server's /apply-template endpoint, which runs
llama.cpp's own Jinja engine and chat code (common/chat.cpp) with the request's
chat_template_kwargs. Start the server first (llama.cpp 0a50d9909; any model with DeepSeek's
special tokens, e.g. shared/testdata/models/ds-tiny-Q4_K_M.gguf):
  llama-server -m ds-tiny-Q4_K_M.gguf --jinja --port 18931 \
      --chat-template-file tests/core/chat/testdata/deepseek-v3.1.jinja
A conversation that ends with an assistant message is left out: llama.cpp renders it as a
prefill to continue (no end-of-sentence), which moesplit does not do.
"""
import json, sys, urllib.request
SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello"}
A1 = {"role": "assistant", "content": "Hi there! How can I help?"}
A1T = {"role": "assistant", "content": "<think>\nThe user says hello.\n</think>\n\nHi there! How can I help?"}
U2 = {"role": "user", "content": "What is 2+2? "}
A2 = {"role": "assistant", "content": "4"}
convs = {
  "user_only": [U1],
  "system_user": [SYS, U1],
  "three_turns": [SYS, U1, A1, U2],
  "reasoning_in_history": [SYS, U1, A1T, U2],
  "two_systems": [SYS, {"role": "system", "content": "Be brief."}, U1],
}
out = {}
for name, msgs in convs.items():
  for kw in [None, {"thinking": False}, {"thinking": True}, {"enable_thinking": True}, {"enable_thinking": False}, {"thinking": False, "enable_thinking": True}, {"thinking": True, "enable_thinking": False}]:
    body = {"messages": msgs}
    if kw is not None: body["chat_template_kwargs"] = kw
    req = urllib.request.Request("http://localhost:18931/apply-template", json.dumps(body).encode(), {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req))
    out[name + "|" + json.dumps(kw)] = r["prompt"]
json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
