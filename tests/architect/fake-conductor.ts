/**
 * A stand-in conductor for the improvement-run tests: it takes each generation's repo task
 * from the task intake and answers at once with a passing result whose patch rewrites
 * `app.py` (the content `write` returns), so a test drives generations without a model.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Streams, materializeSnapshot, publishEvent } from "@loopsmith/shared/bus";
import { Task, type TaskResult } from "@loopsmith/shared/contracts";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import { usage } from "./helpers.js";

/** How the stand-in answers. */
export interface FakeConductorOptions {
  /** `app.py`'s new content for this task, given its content at the task's base. */
  write(task: Task, before: string): string;
  /** The check's test names, all passing. */
  checks: string[];
  /** The change's one-line summary. */
  summary: string;
  /**
   * Files to write instead of app.py: path → new content, given a reader of the task's base
   * tree (the quality-metrics test edits several files of a real package).
   */
  files?: (task: Task, read: (path: string) => string | undefined) => Record<string, string>;
  /** True for a task left queued (nak'd after 1 s, as a busy conductor would). */
  hold?: (taskId: string) => boolean;
}

/**
 * Starts the stand-in on `nc`.
 * @returns a function that stops it (after the fetch in flight, at most 1 s)
 */
export function fakeConductor(nc: NatsConnection, o: FakeConductorOptions): () => void {
  let stopped = false;
  const cache = mkdtempSync(join(tmpdir(), "fake-conductor-"));
  const tests = o.checks.map((name) => ({ name, classname: "t", status: "passed" as const, durationMs: 1 }));
  void (async () => {
    const consumer = await jetstream(nc).consumers.get(Streams.tasks, Streams.conductorConsumer);
    while (!stopped) {
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: 1_000 });
        for await (const msg of batch) {
          const task = Task.parse(msg.json());
          if (stopped || o.hold?.(task.taskId)) {
            msg.nak(1_000);
            continue;
          }
          msg.ack();
          const root = await materializeSnapshot(nc, task.repo?.snapshot ?? "", cache);
          const read = (p: string): string | undefined => {
            try {
              return readFileSync(join(root, p), "utf8");
            } catch {
              return undefined;
            }
          };
          const edits = o.files
            ? Object.entries(o.files(task, read)).map(([path, content]) => ({ path, content }))
            : [{ path: "app.py", content: o.write(task, read("app.py") ?? "") }];
          const patch = unifiedPatch(read, edits, []);
          const result: TaskResult = {
            v: 1,
            taskId: task.taskId,
            status: "passed",
            stopReason: "passed",
            iterations: 1,
            files: [],
            tests: [],
            lastExecution: { status: "passed", durationMs: 1, tests },
            hidden: null,
            failureIds: [],
            usage: { total: usage(0), byRole: {}, byIteration: [] },
            scripted: true,
            providers: [],
            durationMs: 1,
            message: "passed",
            repo: {
              baseCommit: task.repo!.baseCommit,
              patch,
              summary: o.summary,
              changed: edits.map((e) => e.path),
              deleted: [],
            },
          };
          await publishEvent(nc, {
            v: 1,
            taskId: task.taskId,
            seq: 0,
            at: new Date().toISOString(),
            iteration: 1,
            kind: "result",
            message: "passed",
            result,
          });
        }
      } catch {
        if (!stopped) await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();
  return () => void (stopped = true);
}
