/**
 * Project-scale tasks: a goal decomposed into a DAG of subtasks (the planner's `decompose`
 * reply), the checks a plan passes before anything runs, and the state of a DAG run that
 * the conductor checkpoints. The scheduler that runs it is the architect's (`dag/`).
 */
import { createHash } from "node:crypto";
import { Graph, alg } from "@dagrejs/graphlib";
import { z } from "zod";
import { FileChange, RelativePath, TaskId, Usage } from "./common.js";

/** A subtask's id inside its plan: 1–24 lower-case letters, digits, `-` or `_`, starting with a letter. */
export const SubtaskId = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,23}$/,
    "subtask ids are 1-24 lower-case letters, digits, '-' or '_', starting with a letter",
  );
export type SubtaskId = z.infer<typeof SubtaskId>;

/** An interface's name, as subtasks provide and use it (`TodoStore`, `storage.save`, `POST /todos`). */
export const InterfaceName = z.string().min(1).max(120);

/** An interface a subtask provides: its name and the contract others build against. */
export const ProvidedInterface = z.object({
  name: InterfaceName,
  /** Signature, shape or route, as the subtasks that use it must see it. */
  description: z.string().max(2_000).default(""),
});
export type ProvidedInterface = z.infer<typeof ProvidedInterface>;

/** One subtask of a decomposed plan. It becomes a child task of the parent task. */
export const Subtask = z.object({
  id: SubtaskId,
  goal: z.string().min(1).max(8_000),
  /** The workspace files this subtask writes; no other subtask may write them unless ordered by a dependency. */
  files: z.array(RelativePath).min(1).max(50),
  provides: z.array(ProvidedInterface).max(20).default([]),
  /** Names of interfaces this subtask builds against; each must be provided by one of its dependencies (direct or not). */
  uses: z.array(InterfaceName).max(20).default([]),
  /** Subtasks that must have passed before this one starts. */
  dependsOn: z.array(SubtaskId).max(20).default([]),
  /** The subtask's own tests: files it adds to the tree, and they count as files it owns. */
  acceptanceTests: z.array(FileChange).max(20).default([]),
});
export type Subtask = z.infer<typeof Subtask>;

/** A plan as a DAG: what the planner replies when it decomposes a goal. */
export const DagPlan = z.object({
  summary: z.string().min(1).max(4_000),
  subtasks: z.array(Subtask).min(1).max(20),
});
export type DagPlan = z.infer<typeof DagPlan>;
/** A DAG plan as the planner writes it (defaults not yet applied). */
export type DagPlanInput = z.input<typeof DagPlan>;

/** What is wrong with a plan; each problem names the subtasks involved. */
export const DagPlanProblem = z.object({
  /** `unreadable`: the planner's reply was not a plan of subtasks at all. */
  kind: z.enum(["duplicate_id", "unknown_dependency", "cycle", "file_conflict", "interface_missing", "unreadable"]),
  /** The subtasks involved, in the order the message names them. */
  subtasks: z.array(z.string()),
  message: z.string(),
});
export type DagPlanProblem = z.infer<typeof DagPlanProblem>;

/** The dependency graph of a plan: an edge from each dependency to its dependent. Unknown dependencies are left out. */
function dependencyGraph(plan: DagPlan): Graph {
  const g = new Graph({ directed: true });
  for (const s of plan.subtasks) g.setNode(s.id);
  for (const s of plan.subtasks) for (const d of s.dependsOn) if (g.hasNode(d)) g.setEdge(d, s.id);
  return g;
}

/** The graph with every edge turned round (dependent → dependency). */
function reversed(g: Graph): Graph {
  const r = new Graph({ directed: true });
  for (const v of g.nodes()) r.setNode(v);
  for (const e of g.edges()) r.setEdge(e.w, e.v);
  return r;
}

/**
 * Checks a DAG plan before anything runs. Returns every problem found, empty when the plan
 * can run:
 * - `duplicate_id`: two subtasks with one id;
 * - `unknown_dependency`: a `dependsOn` naming no subtask of the plan;
 * - `cycle`: subtasks that depend on each other, directly or not (a self-dependency too);
 * - `file_conflict`: two subtasks owning one file (in `files` or as an acceptance test) where
 *   neither depends on the other, directly or not, so they could write it at the same time;
 * - `interface_missing`: a subtask uses an interface none of its dependencies (direct or
 *   not) provides.
 * Ownership and interface checks run only on an acyclic plan.
 */
export function validateDagPlan(plan: DagPlan): DagPlanProblem[] {
  const problems: DagPlanProblem[] = [];
  const seen = new Set<string>();
  for (const s of plan.subtasks) {
    if (seen.has(s.id))
      problems.push({ kind: "duplicate_id", subtasks: [s.id], message: `two subtasks have the id "${s.id}"` });
    seen.add(s.id);
  }
  for (const s of plan.subtasks) {
    for (const d of s.dependsOn) {
      if (!seen.has(d))
        problems.push({
          kind: "unknown_dependency",
          subtasks: [s.id, d],
          message: `subtask "${s.id}" depends on "${d}", which is not in the plan`,
        });
    }
  }
  const g = dependencyGraph(plan);
  const cycles = alg.findCycles(g);
  for (const cycle of cycles) {
    // findCycles lists a strongly connected component; name it in dependency order.
    const ids = [...cycle].reverse();
    const path =
      ids.length === 1
        ? `"${ids[0]}" depends on itself`
        : `${ids.map((id) => `"${id}"`).join(" → ")} → "${ids[0]}" depend on each other`;
    problems.push({ kind: "cycle", subtasks: ids, message: `a dependency cycle: ${path}` });
  }
  if (cycles.length || problems.some((p) => p.kind === "duplicate_id")) return problems;

  const up = reversed(g);
  const ancestors = new Map(
    plan.subtasks.map((s) => [s.id, new Set(alg.preorder(up, s.id).filter((a) => a !== s.id))]),
  );
  const ordered = (a: string, b: string): boolean => ancestors.get(a)!.has(b) || ancestors.get(b)!.has(a);

  const owners = new Map<string, string[]>();
  for (const s of plan.subtasks) {
    for (const path of new Set([...s.files, ...s.acceptanceTests.map((t) => t.path)]))
      owners.set(path, [...(owners.get(path) ?? []), s.id]);
  }
  for (const [path, ids] of owners) {
    for (let i = 0; i < ids.length; i++) {
      for (let j = i + 1; j < ids.length; j++) {
        if (!ordered(ids[i]!, ids[j]!)) {
          problems.push({
            kind: "file_conflict",
            subtasks: [ids[i]!, ids[j]!],
            message: `subtasks "${ids[i]}" and "${ids[j]}" both own ${path} and neither depends on the other`,
          });
        }
      }
    }
  }

  const providers = new Map<string, string[]>();
  for (const s of plan.subtasks)
    for (const p of s.provides) providers.set(p.name, [...(providers.get(p.name) ?? []), s.id]);
  for (const s of plan.subtasks) {
    for (const name of s.uses) {
      const by = providers.get(name) ?? [];
      if (by.some((p) => ancestors.get(s.id)!.has(p))) continue;
      const where = by.length
        ? `it is provided by ${by.map((p) => `"${p}"`).join(", ")}, which "${s.id}" does not depend on`
        : "no subtask provides it";
      problems.push({
        kind: "interface_missing",
        subtasks: [s.id, ...by],
        message: `subtask "${s.id}" uses ${name}, but ${where}`,
      });
    }
  }
  return problems;
}

/** The subtasks of an acyclic plan in an order where each comes after its dependencies. */
export function dependencyOrder(plan: DagPlan): string[] {
  return alg.topsort(dependencyGraph(plan));
}

/** Every subtask that depends on `id`, directly or not (not `id` itself). */
export function dependentsOf(plan: DagPlan, id: string): string[] {
  return alg.preorder(dependencyGraph(plan), id).filter((d) => d !== id);
}

/** Every subtask `id` depends on, directly or not (not `id` itself), in dependency order. */
export function dependenciesOf(plan: DagPlan, id: string): string[] {
  const up = new Set(alg.preorder(reversed(dependencyGraph(plan)), id));
  return dependencyOrder(plan).filter((d) => d !== id && up.has(d));
}

/**
 * The child task id of one attempt of a subtask: `<parent>--<subtask>-a<attempt>`, or, when
 * that passes the 64 characters of a task id, the parent id shortened and followed by 8 hex
 * digits of its SHA-256 (so two long parents still get different ids). Deterministic: a
 * resumed scheduler re-attaches to the child task it started.
 */
export function childTaskId(parentTaskId: string, subtaskId: string, attempt: number): string {
  const tail = `--${subtaskId}-a${attempt}`;
  const plain = `${parentTaskId}${tail}`;
  if (plain.length <= 64) return TaskId.parse(plain);
  const hash = createHash("sha256").update(parentTaskId).digest("hex").slice(0, 8);
  return TaskId.parse(`${parentTaskId.slice(0, 64 - tail.length - 9)}-${hash}${tail}`);
}

/** Where a subtask is. `cancelled` with reason `dependency_failed` when a dependency gave up. */
export const SubtaskStatus = z.enum(["pending", "running", "passed", "failed", "cancelled"]);
export type SubtaskStatus = z.infer<typeof SubtaskStatus>;

/** The change a passed subtask made, applied to the tree its dependents start from. */
export const SubtaskChange = z.object({
  /** Unified patch against the tree the subtask started from. */
  patch: z.string(),
  changed: z.array(z.string()),
  deleted: z.array(z.string()).default([]),
});
export type SubtaskChange = z.infer<typeof SubtaskChange>;

/** One subtask's progress in a DAG run (checkpointed with the parent task). */
export const SubtaskState = z.object({
  id: SubtaskId,
  status: SubtaskStatus,
  /** Attempts started (1 for the first); a resumed run re-attaches to attempt `attempts`. */
  attempts: z.number().int().nonnegative().default(0),
  /**
   * Attempts made before the subtask was last re-opened (after a failed integration run): its
   * attempt limit counts from here, and its child task ids go on from `attempts`.
   */
  attemptsBefore: z.number().int().nonnegative().default(0),
  /** The child task of the latest attempt. */
  childTaskId: TaskId.optional(),
  /** `dependency_failed`, or the child task's stop reason on the last attempt. */
  reason: z.string().max(100).optional(),
  message: z.string().max(4_000).optional(),
  /** Iterations over all attempts. */
  iterations: z.number().int().nonnegative().default(0),
  usage: Usage.optional(),
  /** ISO-8601 times of the first start and of the end. */
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  change: SubtaskChange.optional(),
  /**
   * The `seq` of the parent's event that announces this subtask's latest move, checkpointed
   * with the move before that event is published: a run that resumes with its `eventSeq` at
   * this seq (no event from it on reached the stream) publishes it then, once.
   */
  moveSeq: z.number().int().nonnegative().optional(),
});
export type SubtaskState = z.infer<typeof SubtaskState>;

/** A DAG run: the validated plan and every subtask's state, in plan order. */
export const DagState = z.object({
  plan: DagPlan,
  subtasks: z.array(SubtaskState),
  /** Subtasks re-opened after a failed integration run (each at most once). */
  reopened: z.array(SubtaskId).default([]),
});
export type DagState = z.infer<typeof DagState>;

/** One subtask as a DAG task's progress events (`data.dag`) and the CLI's tree show it. */
export const SubtaskProgress = z.object({
  id: SubtaskId,
  /** The subtask's goal, its first line cut to 120 characters. */
  goal: z.string(),
  status: SubtaskStatus,
  dependsOn: z.array(SubtaskId),
  /** The attempt running or last run (0 before the first). */
  attempt: z.number().int().nonnegative(),
  /** The iteration the running child task is in (0 when not running). */
  iteration: z.number().int().nonnegative(),
  /** Iterations over the finished attempts. */
  iterations: z.number().int().nonnegative(),
  childTaskId: TaskId.optional(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  /** Tokens (input + output) and USD over the finished attempts. */
  tokens: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative(),
  reason: z.string().optional(),
});
export type SubtaskProgress = z.infer<typeof SubtaskProgress>;

/** A DAG task's progress: every subtask in plan order (`data.dag` of its `schedule` and `integrate` events). */
export const DagProgress = z.object({ subtasks: z.array(SubtaskProgress), reopened: z.array(SubtaskId) });
export type DagProgress = z.infer<typeof DagProgress>;

/**
 * The progress of a DAG run for an event.
 * @param iterations - the iteration each running child task is in, by subtask id (as the scheduler last saw it)
 */
export function dagProgress(state: DagState, iterations: Readonly<Record<string, number>> = {}): DagProgress {
  const planned = new Map(state.plan.subtasks.map((s) => [s.id, s]));
  return {
    reopened: state.reopened,
    subtasks: state.subtasks.map((s) => {
      const sub = planned.get(s.id);
      return {
        id: s.id,
        goal: (sub?.goal.split("\n")[0] ?? "").slice(0, 120),
        status: s.status,
        dependsOn: sub?.dependsOn ?? [],
        attempt: s.attempts,
        iteration: s.status === "running" ? (iterations[s.id] ?? 0) : 0,
        iterations: s.iterations,
        ...(s.childTaskId ? { childTaskId: s.childTaskId } : {}),
        ...(s.startedAt ? { startedAt: s.startedAt } : {}),
        ...(s.finishedAt ? { finishedAt: s.finishedAt } : {}),
        tokens: (s.usage?.inputTokens ?? 0) + (s.usage?.outputTokens ?? 0),
        costUsd: s.usage?.costUsd ?? 0,
        ...(s.reason ? { reason: s.reason } : {}),
      };
    }),
  };
}

/**
 * What the integration reflection answers when the task's tests fail on the merged tree:
 * the one subtask to re-open, and why.
 */
export const IntegrationReflection = z.object({
  subtaskId: SubtaskId,
  rootCause: z.string().min(1).max(4_000),
  fixPlan: z.string().min(1).max(8_000),
});
export type IntegrationReflection = z.infer<typeof IntegrationReflection>;
