/**
 * The harness of the DAG tests (dag.test.ts): a real base snapshot, steps whose model and
 * sandbox are functions (a child's build creates its module; a listed subtask-attempt builds
 * a bad one; the integration run checks the merged tree), children over the real bus, and a
 * conductor on a connection of its own.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pack } from "tar-stream";
import { DEFAULT_OWNER, materializeSnapshot, putSnapshot } from "@loopsmith/shared/bus";
import {
  DagPlan,
  snapshotName,
  type BuildRequest,
  type DagPlanInput,
  type DagPlanProblem,
  type ExecutionRequest,
  type ExecutionResult,
  type TaskEvent,
  type TaskInput,
} from "@loopsmith/shared/contracts";
import { busChildTasks, startConductor, type Conductor, type Steps } from "@loopsmith/architect";
import { failed, log, passed, steps, task, usage } from "./helpers.js";

export const provider = { name: "test", model: "m", scripted: true };

/** A tar of `files` (what the CLI uploads for a repository at a commit). */
export async function tarOf(files: Record<string, string>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on("data", (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((resolve) => p.on("end", resolve));
  for (const [name, content] of Object.entries(files)) p.entry({ name, mtime: new Date(0) }, content);
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

export const BASE = {
  "README.md": "# todo api\n",
  "tests/test_api.py": "from todo_api.handlers import handle\n\ndef test_api():\n    assert handle() == 'ok'\n",
};
export const BASE_COMMIT = "b".repeat(40);

/** model → (storage ∥ validation) → handlers, each owning one module and one test file. */
export function plan(over: (p: DagPlanInput) => DagPlanInput = (p) => p): DagPlanInput {
  const sub = (id: string, dependsOn: string[], provides: string[], uses: string[]) => ({
    id,
    goal: `write todo_api/${id}.py`,
    files: [`todo_api/${id}.py`],
    provides: provides.map((name) => ({ name, description: `${name}()` })),
    uses,
    dependsOn,
    acceptanceTests: [{ path: `tests/test_${id}.py`, content: `import todo_api.${id}\n` }],
  });
  return over({
    summary: "a todo API in four modules",
    subtasks: [
      sub("model", [], ["Todo"], []),
      sub("storage", ["model"], ["Store"], ["Todo"]),
      sub("validation", ["model"], ["validate"], ["Todo"]),
      sub("handlers", ["storage", "validation"], ["handle"], ["Store", "validate"]),
    ],
  });
}

/** The subtask a child task id belongs to (`<parent>--<sub>-a<N>`). */
export const subOf = (taskId: string): string | undefined => /--([a-z]+)-a\d+$/.exec(taskId)?.[1];
export const attemptOf = (taskId: string): number => Number(/-a(\d+)$/.exec(taskId)?.[1] ?? 0);

export interface Harness {
  steps: Steps;
  builds: BuildRequest[];
  runs: ExecutionRequest[];
  decomposed: DagPlanProblem[][];
}

/**
 * Steps for a DAG task over real NATS: `tree` extracts real snapshots, children go through the
 * bus. A child's build creates its module (`bad` for the subtask-attempts listed in `fails`);
 * a child's sandbox run passes when its module is there and not bad, after `runMs`; the
 * integration run passes when all four modules are in the merged tree.
 */
export function harness(
  nc: NatsConnection,
  conductor: () => Conductor,
  opts: {
    plans?: DagPlanInput[];
    fails?: (sub: string, attempt: number) => boolean;
    runMs?: number;
    integrationFailures?: number;
  } = {},
): Harness {
  let integrations = 0;
  const cache = mkdtempSync(join(tmpdir(), "loopsmith-dag-"));
  const builds: BuildRequest[] = [];
  const runs: ExecutionRequest[] = [];
  const decomposed: DagPlanProblem[][] = [];
  const base = steps([failed()]);
  const s: Steps = {
    ...base.steps,
    tree: (snapshot, owner) => materializeSnapshot(nc, snapshot, cache, owner),
    decompose: async (_req, problems) => {
      decomposed.push([...problems]);
      const plans = opts.plans ?? [plan()];
      return {
        value: DagPlan.parse(plans[Math.min(decomposed.length - 1, plans.length - 1)]),
        usage: usage(),
        provider,
      };
    },
    build: async (req) => {
      builds.push(req);
      const sub = subOf(req.taskId) ?? "none";
      const bad = opts.fails?.(sub, attemptOf(req.taskId)) ?? false;
      // Each iteration of a child starts from its base tree (edits are cumulative: create once).
      const exists = req.task.repo?.files.some((f) => f.path === `todo_api/${sub}.py`);
      const edits = exists
        ? []
        : [
            {
              path: `todo_api/${sub}.py`,
              search: "",
              replace: bad ? "raise SystemExit(1)\n" : `# ${sub}\n`,
              delete: false,
            },
          ];
      return {
        value: {
          files: [],
          tests: [],
          notes: "",
          edits: edits.length
            ? edits
            : [{ path: "README.md", search: "# todo api\n", replace: "# todo api\n", delete: false }],
          summary: `${sub} module`,
        },
        usage: usage(),
        provider,
      };
    },
    execute: async (req): Promise<ExecutionResult> => {
      runs.push(req);
      await new Promise((r) => setTimeout(r, opts.runMs ?? 50));
      const sub = subOf(req.taskId);
      if (!sub) {
        // The parent: its baseline (nothing built) and its integration run (all four modules merged).
        const mods = ["model", "storage", "validation", "handlers"].filter((m) =>
          req.files.some((f) => f.path === `todo_api/${m}.py`),
        );
        if (mods.length === 4 && ++integrations <= (opts.integrationFailures ?? 0))
          return failed("AttributeError: 'Store' object has no attribute 'save'");
        return mods.length === 4 ? passed : failed(`ModuleNotFoundError: ${4 - mods.length} modules missing`);
      }
      const mine = req.files.find((f) => f.path === `todo_api/${sub}.py`);
      return mine && !mine.content.includes("SystemExit") ? passed : failed(`ImportError: todo_api.${sub}`);
    },
    reflectIntegration: async (req) => ({
      value: {
        subtaskId: req.reopened.includes("storage") ? "validation" : "storage",
        rootCause: "Store has no save()",
        fixPlan: "add Store.save",
      },
      usage: usage(),
      provider,
    }),
    children: busChildTasks(nc, async (taskId, owner) => void (await conductor().cancel(taskId, owner))),
  };
  return { steps: s, builds, runs, decomposed };
}

export async function dagTask(nc: NatsConnection, over: Partial<TaskInput> = {}): Promise<TaskInput> {
  const tar = await tarOf(BASE);
  await putSnapshot(nc, snapshotName(BASE_COMMIT), tar, DEFAULT_OWNER);
  return task({
    goal: "a REST API for todo items",
    acceptanceTests: [],
    decompose: true,
    parallel: 2,
    repo: {
      baseCommit: BASE_COMMIT,
      snapshot: snapshotName(BASE_COMMIT),
      testCommand: "python3 -m pytest -q",
      setupCommand: "",
      // The stand-in builder answers one-shot build requests.
      mode: "oneshot",
    },
    limits: { maxIterations: 2, subtaskAttempts: 2 },
    ...over,
  });
}

/** Runs `fn` with a conductor (concurrency 4) over the harness's steps on a connection of its own. */
export async function withDagConductor<T>(
  url: string,
  make: (nc: NatsConnection, c: () => Conductor) => Harness,
  fn: (nc: NatsConnection, h: Harness) => Promise<T>,
): Promise<T> {
  const nc = await connect({ servers: url });
  const ref: { conductor?: Conductor } = {};
  const h = make(nc, () => ref.conductor!);
  const conductor = (ref.conductor = await startConductor({ nc, steps: h.steps, log, concurrency: 4 }));
  try {
    return await fn(nc, h);
  } finally {
    await conductor.stop();
    await nc.close();
  }
}

/** The time of the parent's event where `sub` reached `status`. */
export function at(events: TaskEvent[], sub: string, status: string): number {
  const e = events.find((x) => x.subtaskId === sub && x.message.startsWith(`subtask ${sub}: ${status}`));
  if (!e) throw new Error(`no event for ${sub} ${status}`);
  return Date.parse(e.at);
}
