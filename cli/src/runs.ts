/**
 * `loopsmith show <taskId>` and `loopsmith export <taskId> --out <dir>`: a recorded run read
 * back from memory (over NATS, starting NATS and memory when they are missing, like
 * `history`), printed for people or as JSON, or written to a folder: `result.json`,
 * `report.md` and, in repo mode, `change.patch`. `solve --out` writes the same folder with
 * {@link exportRun} (or {@link writeExport} over a record it built itself).
 *
 * Exit codes: 0 done; 2 no run of that task is recorded (`not_found`), a bad task id, a
 * folder that cannot be written or a configuration error; 3 NATS, Docker or memory
 * unavailable.
 */
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { Endpoints, call, type CallOptions, natsServers } from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import {
  RUN_EVENTS_CAP,
  RunRecord,
  type TaskEvent,
  type TaskInput,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { ExitCode } from "./exit-codes.js";
import { reportMarkdown, runText } from "./run-view.js";
import { transcriptSteps } from "./transcript-view.js";
import { colourEnabled } from "./ui/index.js";
import { startLocalStack } from "./stack.js";
import { jsonLine, printable } from "./terminal.js";

/** Times a run is read again from the start when it was recorded anew while being read. */
const FETCH_RESTARTS = 3;

/**
 * Reads a task's recorded run from memory, part by part (a run may be larger than one NATS
 * message), checking that every part belongs to the same recording and that the whole text
 * has the announced SHA-256.
 * @throws LoopsmithError `not_found` when no run of the task is recorded; `unavailable` or
 *   `timeout` when memory does not answer; `internal` when the parts do not add up
 */
export async function fetchRun(nc: NatsConnection, taskId: string, opts: CallOptions = {}): Promise<RunRecord> {
  attempts: for (let attempt = 0; attempt < FETCH_RESTARTS; attempt++) {
    let text = "";
    let sha256: string | undefined;
    for (;;) {
      const part = await call(nc, Endpoints.memory.run, { v: 1, taskId, offset: text.length }, opts);
      if (sha256 !== undefined && part.sha256 !== sha256) continue attempts; // recorded again meanwhile
      sha256 = part.sha256;
      if (part.offset !== text.length)
        throw new LoopsmithError(
          "internal",
          `memory sent the part of the run of ${taskId} at ${part.offset}, not at ${text.length}`,
        );
      text += part.text;
      if (text.length >= part.total) break;
      if (part.text.length === 0)
        throw new LoopsmithError(
          "internal",
          `memory sent an empty part of the run of ${taskId} at ${text.length} of ${part.total}`,
        );
    }
    if (createHash("sha256").update(text, "utf8").digest("hex") !== sha256) {
      throw new LoopsmithError("internal", `the run of ${taskId} read from memory does not match its checksum`);
    }
    return RunRecord.parse(JSON.parse(text));
  }
  throw new LoopsmithError(
    "unavailable",
    `the run of ${taskId} was recorded again while it was being read, ${FETCH_RESTARTS} times; try again`,
  );
}

/** Options of `show` and `export`. */
export interface RunCommandOptions {
  json?: boolean;
  config?: string;
  /** `show`: an agent-mode run's steps with their thoughts and observations (`--json`: the steps alone). */
  transcript?: boolean;
}

/**
 * Runs `fn` with a connection to memory and the owner this client reads as (see `ownerOf`):
 * NATS and memory are started when missing and stopped afterwards (as `history` does).
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout`; whatever `fn` throws
 */
export async function withMemory<T>(
  log: Logger,
  configFile: string | undefined,
  fn: (nc: NatsConnection, owner: string) => Promise<T>,
): Promise<T> {
  const config = loadConfig(configFile ? { file: configFile } : {});
  const stack = await startLocalStack({ config, log, services: ["memory"] });
  try {
    const nc = await connect({ ...stack.connectOptions, servers: natsServers(stack.natsUrl) });
    try {
      return await fn(nc, stack.owner);
    } finally {
      await nc.close();
    }
  } finally {
    await stack.stop();
  }
}

/**
 * A run record from what a client watched itself (`solve --out`): the task as submitted, the
 * events it received (the result event included) and the result; at most `RUN_EVENTS_CAP`
 * events kept (the first ones, and the result). Pure.
 * @throws LoopsmithError `bad_request` when the task, an event or the result fails its contract
 */
export function localRunRecord(task: TaskInput, events: TaskEvent[], result: TaskResult | null): RunRecord {
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  const kept =
    sorted.length > RUN_EVENTS_CAP
      ? [...sorted.slice(0, RUN_EVENTS_CAP - 1), ...sorted.filter((e) => e.kind === "result").slice(-1)]
      : sorted;
  const parsed = RunRecord.safeParse({
    v: 1,
    taskId: task.taskId,
    task,
    result,
    events: kept,
    eventsTruncated: kept.length < sorted.length,
    eventsTotal: sorted.length,
    recordedAt: new Date().toISOString(),
  });
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `the run of ${task.taskId} cannot be recorded: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  return parsed.data;
}

/**
 * Writes a run to `dir` (created when missing): `result.json` (the `TaskResult`, or the
 * whole run record when it has no result), `report.md` (see `reportMarkdown`) and, when the
 * result has a repo-mode change, `change.patch` (the unified diff against the base commit,
 * `git apply` reads it; empty when nothing changed). Files already there are replaced.
 * @returns the absolute paths written, in that order
 * @throws LoopsmithError `bad_request` when the folder or a file cannot be written
 */
export async function writeExport(record: RunRecord, dir: string): Promise<string[]> {
  const root = resolve(dir);
  const files: [string, string][] = [
    ["result.json", `${JSON.stringify(record.result ?? record, null, 2)}\n`],
    ["report.md", reportMarkdown(record)],
  ];
  if (record.result?.repo) files.push(["change.patch", record.result.repo.patch]);
  const written: string[] = [];
  try {
    await mkdir(root, { recursive: true });
    for (const [name, content] of files) {
      const path = join(root, name);
      await writeFile(path, content, "utf8");
      written.push(path);
    }
  } catch (err) {
    throw new LoopsmithError(
      "bad_request",
      `cannot write the export of ${record.taskId} to ${root}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  return written;
}

/**
 * Fetches a task's run from memory and writes it to `dir` (see {@link writeExport}); for
 * `solve --out`, right after the result came (memory records the run before the result
 * event is published). When memory has no run of the task (memory was down when the task
 * ended), writes `fallback` instead when one is given.
 * @returns the absolute paths written
 * @throws LoopsmithError `not_found` (no run, no fallback), `unavailable`/`timeout`,
 *   `bad_request` (the folder cannot be written)
 */
export async function exportRun(
  nc: NatsConnection,
  owner: string,
  taskId: string,
  dir: string,
  fallback?: RunRecord,
): Promise<string[]> {
  let record: RunRecord;
  try {
    record = await fetchRun(nc, taskId, { owner });
  } catch (err) {
    if (!fallback || (err as { code?: unknown }).code !== "not_found") throw err;
    record = fallback;
  }
  return writeExport(record, dir);
}

/**
 * `loopsmith show <taskId>`: prints the recorded run (`--json`: the run record, one line).
 * With `--transcript`, an agent-mode run's steps carry their thoughts and observations, and
 * `--json` prints `{"kind":"transcript","taskId","steps":[RecordedStep…]}` instead (the steps
 * read from the messages its events carry, or from an older run's `TranscriptStep` events).
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `not_found` (no run of that task), `config_invalid`, `unavailable`
 *   or `timeout` (NATS, Docker or memory)
 */
export async function showCommand(taskId: string, opts: RunCommandOptions, log: Logger): Promise<number> {
  const record = await withMemory(log, opts.config, (nc, owner) => fetchRun(nc, taskId, { owner }));
  if (opts.json && opts.transcript)
    process.stdout.write(`${jsonLine({ kind: "transcript", taskId, steps: transcriptSteps(record.events) })}\n`);
  else if (opts.json) process.stdout.write(`${jsonLine(record)}\n`);
  else
    process.stdout.write(
      runText(record, { transcript: opts.transcript ?? false, color: colourEnabled(process.stdout) }),
    );
  return ExitCode.ok;
}

/**
 * `loopsmith export <taskId> --out <dir>`: writes the recorded run to `dir` (see
 * {@link writeExport}) and names the files written (`--json`: `{"kind":"export",…}`).
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `not_found`, `bad_request` (the folder cannot be written),
 *   `config_invalid`, `unavailable` or `timeout`
 */
export async function exportCommand(
  taskId: string,
  opts: RunCommandOptions & { out: string },
  log: Logger,
): Promise<number> {
  const record = await withMemory(log, opts.config, (nc, owner) => fetchRun(nc, taskId, { owner }));
  const files = await writeExport(record, opts.out);
  process.stdout.write(
    opts.json
      ? `${jsonLine({ kind: "export", taskId, files })}\n`
      : `${files.map((f) => `wrote ${printable(f)}`).join("\n")}\n`,
  );
  return ExitCode.ok;
}
