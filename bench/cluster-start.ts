/**
 * bench/cluster-start: how often a fresh start of the compose cluster (deploy/compose.cluster.yml
 * over the main file) leaves a NATS node out of the JetStream meta group, the nats-server 2.10
 * fault that deploy/cluster-up.sh heals. Each start is `down -v`, then `up -d` of the three NATS
 * nodes (with `--stack`, `up -d --build --wait` of everything: bus-setup must then exit 0). A
 * start is good when the meta leader's `/jsz` reports a group of three within `--settle`
 * seconds. `--conf` runs the nodes on another configuration (`LOOPSMITH_NATS_CLUSTER_CONF`),
 * to compare a setting against the shipped file in two runs. Prints one line per start and a
 * table.
 *
 * Usage: node --import tsx bench/cluster-start.ts [--starts 10] [--stack] [--settle 30]
 *          [--conf deploy/nats-cluster.conf]
 * Needs Docker with Compose v2, the locally built images, and for --stack sandbox-images.tar
 * (bash deploy/compose-env.sh --engines).
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { median } from "simple-statistics";
import { settleMembership } from "@loopsmith/shared/bus";
import { docker, freePort, prepareProject, type Project } from "./chaos/compose.js";

const opts = new Command()
  .option("--starts <n>", "fresh starts", Number, 10)
  .option("--stack", "start every service too (up --build --wait), not the three NATS nodes alone")
  .option("--settle <s>", "how long a start may take to form a group of three", Number, 30)
  .option("--conf <file>", "the nodes' configuration", "deploy/nats-cluster.conf")
  .parse(process.argv)
  .opts<{ starts: number; stack?: boolean; settle: number; conf: string }>();

const REPO = fileURLToPath(new URL("../", import.meta.url));
const NODES = ["nats", "nats-2", "nats-3"];

/** A node's monitoring URL on the project's network (the host reaches container addresses on Linux). */
async function monitorUrl(project: Project, service: string): Promise<string> {
  const [id] = await project.containers(service);
  const ip = id
    ? (await docker(["inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id])).trim()
    : "";
  return `http://${ip || "0.0.0.0"}:8222`;
}

/** Waits up to `settleMs` for the leader to report all three (settleMembership: complete at once, else its last reading). */
async function group(project: Project, settleMs: number): Promise<{ ok: boolean; seen: string; ms: number }> {
  const start = Date.now();
  const urls = await Promise.all(NODES.map((n) => monitorUrl(project, n)));
  const { outcome, membership: m } = await settleMembership(urls, { waitMs: settleMs, settleMs });
  const seen = `leader ${m.leader ?? "-"}, members ${m.members.join("+") || "-"}, left out ${m.leftOut.join("+") || "-"}`;
  return { ok: outcome === "complete" && m.members.length === NODES.length, seen, ms: Date.now() - start };
}

async function main(): Promise<number> {
  if (opts.stack && !existsSync(join(REPO, "sandbox-images.tar"))) {
    console.error("cluster-start: --stack needs sandbox-images.tar: run bash deploy/compose-env.sh --engines");
    return 2;
  }
  const conf = resolve(REPO, opts.conf);
  if (!existsSync(conf)) {
    console.error(`cluster-start: no configuration at ${conf}`);
    return 2;
  }
  const name = `loopsmith-cstart-${randomBytes(3).toString("hex")}`;
  const project = prepareProject({
    repo: REPO,
    name,
    natsPort: await freePort(),
    scriptDir: join(REPO, "bench", "chaos"),
    dir: join(tmpdir(), name),
    files: ["deploy/compose.cluster.yml"],
    env: { LOOPSMITH_NATS_CLUSTER_CONF: conf },
  });
  const results: { ok: boolean; ms: number }[] = [];
  const up = opts.stack ? ["up", "-d", "--build", "--wait", "--wait-timeout", "600"] : ["up", "-d", ...NODES];
  let interrupted = false;
  process.once("SIGINT", () => (interrupted = true));
  try {
    for (let i = 1; i <= opts.starts && !interrupted; i++) {
      await project.compose(["down", "-v", "--timeout", "5"]);
      const t0 = Date.now();
      let upError = "";
      await project.compose(up, 900_000).catch((err: Error) => (upError = err.message.split("\n")[0] ?? "up failed"));
      const g = await group(project, opts.settle * 1000);
      let ok = g.ok;
      let extra = "";
      if (opts.stack) {
        const [bs] = (await project.compose(["ps", "-a", "-q", "bus-setup"])).split("\n").filter(Boolean);
        const code = bs ? (await docker(["inspect", "-f", "{{.State.ExitCode}}", bs])).trim() : "?";
        ok = ok && code === "0" && !upError;
        extra = `; up ${((Date.now() - t0) / 1000).toFixed(0)} s, bus-setup exit ${code}${upError ? `, ${upError}` : ""}`;
      }
      results.push({ ok, ms: g.ms });
      console.log(
        `start ${i}: ${ok ? "group of three" : "NODE LEFT OUT"} (${(g.ms / 1000).toFixed(1)} s)${extra}${ok ? "" : ` — ${g.seen}`}`,
      );
    }
  } finally {
    await project.compose(["down", "-v", "--timeout", "5"]).catch(() => "");
  }
  const bad = results.filter((r) => !r.ok).length;
  const times = results.filter((r) => r.ok).map((r) => r.ms);
  console.log(
    `\n${opts.stack ? "the whole cluster stack" : "the three NATS nodes alone"}, fresh starts, ${relative(REPO, conf)}:`,
  );
  console.log("| starts | node left out | share | group of three after (median) |");
  console.log("|---|---|---|---|");
  console.log(
    `| ${results.length} | ${bad} | ${results.length ? ((bad / results.length) * 100).toFixed(0) : "-"}% | ${times.length ? `${(median(times) / 1000).toFixed(1)} s` : "-"} |`,
  );
  return 0;
}

process.exit(await main());
