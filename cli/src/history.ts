/** `loopsmith history` and `loopsmith stats`: read memory through its service. */
import { connect } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { Endpoints, call, loadConfig } from "@loopsmith/shared";
import { usd } from "./output.js";
import { startLocalStack } from "./stack.js";

async function withMemory<T>(log: Logger, fn: (nc: Awaited<ReturnType<typeof connect>>) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const stack = await startLocalStack({ config, log, services: ["memory"] });
  const nc = await connect({ servers: stack.natsUrl });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
    await stack.stop();
  }
}

/** Prints recent tasks, newest first. */
export async function historyCommand(opts: { limit: number; json?: boolean }, log: Logger): Promise<number> {
  const history = await withMemory(log, (nc) => call(nc, Endpoints.memory.history, { v: 1, limit: opts.limit }));
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(history)}\n`);
    return 0;
  }
  for (const t of history.tasks) {
    const goal = t.goal.replace(/\s+/g, " ").slice(0, 60);
    process.stdout.write(`${t.finishedAt}  ${t.status.padEnd(9)} ${String(t.iterations).padStart(2)} it  ${usd(t.usage.costUsd).padStart(8)}${t.scripted ? " scripted" : ""}  ${t.taskId}  ${goal}\n`);
  }
  if (history.tasks.length === 0) process.stdout.write("no tasks yet\n");
  return 0;
}

/** Prints memory statistics. */
export async function statsCommand(opts: { json?: boolean }, log: Logger): Promise<number> {
  const stats = await withMemory(log, (nc) => call(nc, Endpoints.memory.stats, { v: 1 }));
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(stats)}\n`);
    return 0;
  }
  const rate = stats.tasks ? ((100 * stats.passed) / stats.tasks).toFixed(0) : "0";
  process.stdout.write(
    [
      `tasks: ${stats.tasks} (${stats.passed} passed, ${rate}%)`,
      `mean iterations to pass: ${stats.meanIterationsToPass?.toFixed(2) ?? "n/a"}`,
      `failures remembered: ${stats.failures}; successes remembered: ${stats.successes}`,
      `total LLM cost: ${usd(stats.totalCostUsd)}`,
      `memory back end: ${stats.backend}`,
      "",
    ].join("\n"),
  );
  return 0;
}
