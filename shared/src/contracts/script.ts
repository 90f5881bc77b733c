/**
 * Replies that travel with a task instead of coming from a model: a scripted provider's
 * replies (`loopsmith-script`) or a simulation (`loopsmith-simulation`). A task that carries
 * one is answered by it whatever provider the stack runs, so one running stack serves many
 * different scripted tasks at once; every reply then says `scripted: true` (no model was
 * called), and a simulation names its provider `simulated`.
 */
import { z } from "zod";

const Entries = z.array(z.unknown());

/**
 * One scripted model turn of agent mode: optional text and the tool calls it makes, as a
 * transcript replays them (`loopsmith replay`). `id` defaults to `call_<turn>_<index>`.
 */
export const ScriptTurn = z.object({
  content: z.string().default(""),
  toolCalls: z
    .array(
      z.object({
        id: z.string().min(1).max(200).optional(),
        name: z.string().min(1).max(100),
        args: z.record(z.string(), z.unknown()).default({}),
      }),
    )
    .max(20)
    .default([]),
});
export type ScriptTurn = z.infer<typeof ScriptTurn>;

/** Replies per role. Unknown roles are an error, so a typo does not silently fall through. */
export const RoleReplies = z
  .object({
    spec: Entries.optional(),
    plan: Entries.optional(),
    build: Entries.optional(),
    review: Entries.optional(),
    reflect: Entries.optional(),
    improve: Entries.optional(),
    /** Agent-mode turns, each a {@link ScriptTurn}. */
    agent: z.array(z.lazy(() => ScriptTurn)).optional(),
  })
  .strict();
export type RoleReplies = z.infer<typeof RoleReplies>;

/**
 * A script: the n-th call for a role within one task gets `replies[role][n]` (0-based); once
 * the list is used up the last entry repeats. A string entry is raw reply text; any other
 * JSON value is the reply as JSON. See `shared/src/llm/scripted.ts`.
 */
export const ScriptFile = z.object({
  v: z.literal(1),
  kind: z.literal("loopsmith-script"),
  description: z.string().optional(),
  replies: RoleReplies,
  /**
   * Replies for some tasks only: a key matches the task id itself or its last `-`-separated
   * part(s) (`gen-2` matches `run7-gen-2`, the second generation of an improvement run). A
   * role a matching entry names takes its replies from there; any other role from `replies`.
   */
  tasks: z.record(z.string().min(1), RoleReplies).optional(),
});
export type ScriptFile = z.infer<typeof ScriptFile>;

/** One wrong candidate a simulation answers before it knows the fix. */
export const SimulatedWrong = z.object({
  /** The whole file, wrong. */
  content: z.string(),
  /**
   * What is wrong, as a task-independent key (for a mutant: the operator change, such as
   * `== -> !=`). Two failures with the same cause key are "the same failure".
   */
  cause: z.string().min(1).max(200),
  /** One sentence for people (`line 3: \`==\` changed to \`!=\``). */
  description: z.string().max(500),
});
export type SimulatedWrong = z.infer<typeof SimulatedWrong>;

/**
 * A simulation of a model on one dataset task, to make memory's effect measurable offline.
 * It answers the first build with a wrong candidate (a mutant of the
 * canonical solution) and applies the fix (the canonical solution) only when the prompt
 * carries it: its own earlier reflection found the cause, or a hint recalled from memory
 * names the same cause. A reflection finds the cause unaided with probability `findRate`
 * (drawn from `seed`, `source` and the iteration, so both arms of an A/B, which have
 * different task ids, draw the same).
 * It measures whether memory routes the right fix into the prompt; it is never a model's
 * performance, and every output says `simulated`.
 */
export const Simulation = z.object({
  v: z.literal(1),
  kind: z.literal("loopsmith-simulation"),
  /** The dataset task it simulates (`HumanEval/12`), for labels. */
  source: z.string().min(1).max(200),
  /** Path of the one file the candidate is (`solution.py`). */
  path: z.string().min(1).max(500),
  /** The right file content (the canonical solution). */
  solution: z.string(),
  /**
   * Wrong candidates: the first is answered, and answered again (a stuck model) until the fix
   * is known; the others are recognised when a prompt shows them.
   */
  wrong: z.array(SimulatedWrong).min(1).max(20),
  /** Probability in [0, 1] that a reflection finds the cause without a hint. @defaultValue 0.3 */
  findRate: z.number().min(0).max(1).default(0.3),
  /** Seed of the draws. @defaultValue 1 */
  seed: z.number().int().default(1),
});
export type Simulation = z.infer<typeof Simulation>;

/** What a task may carry instead of a model: a script or a simulation. */
export const TaskScript = z.discriminatedUnion("kind", [ScriptFile, Simulation]);
export type TaskScript = z.infer<typeof TaskScript>;
