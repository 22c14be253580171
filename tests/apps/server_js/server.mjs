// Starts `moesplit serve` on a free loopback port for a test file and stops it afterwards.
//   MOESPLIT_BIN    the moesplit binary (default: ../../../build/release/apps/moesplit)
//   MOESPLIT_MODEL  the GGUF model (scripts/test-server.sh makes ds-tiny)
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.MOESPLIT_BIN ?? path.join(here, "../../../build/release/apps/moesplit");
export const MODEL = process.env.MOESPLIT_MODEL;

export async function startServer(args = [], { timeoutMs = 60000 } = {}) {
  if (!MODEL) throw new Error("set MOESPLIT_MODEL to a GGUF file (scripts/test-server.sh does)");
  const proc = spawn(BIN, ["serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no 'listening on' line:\n" + log)), timeoutMs);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`serve exited ${code}:\n${log}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await fetch(base + "/health").catch(() => null);
    if (r && r.status === 200) break;
    if (Date.now() > deadline) throw new Error("not ready:\n" + log);
    await new Promise((res) => setTimeout(res, 50));
  }
  return {
    proc, port, base,
    log: () => log,
    rssKiB: () => Number(readFileSync(`/proc/${proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]),
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((res) => proc.on("exit", res));
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// /metrics as {name: value} without the "moesplit:" prefix.
export async function metrics(base, headers = {}) {
  const text = await (await fetch(base + "/metrics", { headers })).text();
  const m = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const [k, v] = line.split(" ");
    m[k.replace(/^moesplit:/, "")] = Number(v);
  }
  return m;
}
