/**
 * The simulated backend: answers one dataset task from its {@link Simulation} instead of a
 * model, so memory's effect can be measured offline. It never calls a model and says so:
 * its info is `{name: "simulated", model: "simulated:<source>", scripted: true}`, and its
 * calls cost zero tokens and zero dollars.
 *
 * It is stateless: every answer is a function of the request (its role, its
 * `context.iteration` and the rendered prompt in its messages) and the simulation, so a
 * step retried on another replica or after a restart gets the same answer.
 *
 * The cause marker `[simulated cause: <cause>]` ({@link causeMarker}) stands for "the model
 * understood what is wrong". A reflection that finds the cause writes it into `rootCause`;
 * memory stores the reflection, and `renderHints` shows its `root cause:` when a later
 * task recalls the failure, so that task's prompt then carries the marker inside its
 * "Hints from memory" section. A build knows the fix of the failing wrong candidate only
 * when its prompt carries that candidate's marker in a recalled failure's root cause or
 * fix plan (the "Hints from memory" section) or in the previous reflection ("Reflection on
 * the failure"); a marker anywhere else (the goal, the test output) does not count.
 */
import { createHash } from "node:crypto";
import type { Candidate, Plan, Reflection, Review } from "../contracts/plan.js";
import type { SimulatedWrong, Simulation } from "../contracts/script.js";
import { LoopsmithError } from "../runtime/errors.js";
import { LESSON_SCHEMA_NAME } from "./lesson-prompt.js";
import { renderFile } from "./prompts.js";
import type { Backend, Conversation } from "./engine.js";
import { replayConversation } from "./scripted.js";
import type { ChatMessage, CompletionRequest } from "./types.js";

/** The section headers of the rendered prompts the simulation reads (see `section()` in prompts.ts). */
const HEADER = {
  hints: "## Hints from memory\n",
  lessons: "## Lessons from memory\n",
  lessonReflection: "## Reflection on the last failure\n",
  lessonFailures: "## Failures of this task (one per signature)\n",
  previous: "## Your previous candidate\n",
  reflection: "## Reflection on the failure\n",
  candidate: "## Candidate\n",
} as const;

/** Where a recalled failure's reflection starts and its fixed files begin (see `renderHints`). */
const HINT_ROOT_CAUSE = "\n  root cause: ";
const HINT_FIXED_FILES = "\n  what then passed (iteration ";

/**
 * The text that means "the cause of this wrong candidate is known": `[simulated cause: <cause>]`.
 * @param cause - a {@link SimulatedWrong.cause} (`== -> !=`)
 */
export function causeMarker(cause: string): string {
  return `[simulated cause: ${cause}]`;
}

/**
 * The draw of a reflection: a number in [0, 1) from the SHA-256 of `(seed, source,
 * iteration)`. Keyed by the simulated dataset task (`source`), not the task id, so both arms
 * of an A/B (different task ids, the same case) draw the same. A reflection finds the cause
 * unaided when the draw is below `findRate`: never at 0, always at 1.
 */
export function simulatedDraw(sim: Pick<Simulation, "seed" | "source">, iteration: number): number {
  const digest = createHash("sha256")
    .update(JSON.stringify([sim.seed, sim.source, iteration]))
    .digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
}

/** Index just after the last `header` that starts a line of `text`, else -1. */
function afterHeader(text: string, header: string): number {
  for (let at = text.lastIndexOf(header); at >= 0; at = at === 0 ? -1 : text.lastIndexOf(header, at - 1)) {
    if (at === 0 || text[at - 1] === "\n") return at + header.length;
  }
  return -1;
}

/**
 * The rest of a user message after `header` (at a line start; the last one in the message):
 * in the last user message that has it, or with `first`, in the first user message only
 * (the task and the hints, the prefix both the builder and the planner send first).
 */
function sectionRest(messages: ChatMessage[], header: string, first = false): string | undefined {
  const users = messages.filter((m) => m.role === "user");
  for (const m of first ? users.slice(0, 1) : users.reverse()) {
    const at = afterHeader(m.content, header);
    if (at >= 0) return m.content.slice(at);
  }
  return undefined;
}

/** Which file of the simulation a rendered candidate is. */
type Shown = { kind: "wrong"; wrong: SimulatedWrong } | { kind: "solution" } | { kind: "unknown" };

/**
 * The candidate file `sim.path` as the section under `header` shows it (rendered by
 * `renderFile`), matched against the simulation's files; `undefined` when the prompt has
 * no such section. A file that matches nothing (or is missing) is `unknown`.
 */
function shownCandidate(sim: Simulation, messages: ChatMessage[], header: string): Shown | undefined {
  const rest = sectionRest(messages, header);
  if (rest === undefined) return undefined;
  const opener = `--- ${sim.path}\n`;
  const at = rest.startsWith(opener) ? 0 : rest.indexOf(`\n${opener}`) + 1;
  if (at === 0 && !rest.startsWith(opener)) return { kind: "unknown" };
  const options: Array<{ shown: Shown; rendered: string }> = [
    { shown: { kind: "solution" }, rendered: renderFile({ path: sim.path, content: sim.solution }) },
    ...sim.wrong.map((wrong) => ({
      shown: { kind: "wrong", wrong } as Shown,
      rendered: renderFile({ path: sim.path, content: wrong.content }),
    })),
  ];
  // The longest rendering that matches, so a file that is a prefix of another cannot shadow it.
  const match = options
    .filter((o) => rest.startsWith(o.rendered, at))
    .sort((a, b) => b.rendered.length - a.rendered.length)[0];
  return match?.shown ?? { kind: "unknown" };
}

/**
 * Whether a recalled lesson's rule (in "Lessons from memory", after the hints) or a recalled
 * failure's root cause or planned fix (in "Hints from memory") carries `marker`.
 */
function hintCarries(messages: ChatMessage[], marker: string): boolean {
  const lessons = sectionRest(messages, HEADER.lessons, true);
  if (
    lessons
      ?.split("\n- [memory:")
      .slice(1)
      .some((entry) => entry.startsWith("lesson:") && entry.includes(marker))
  )
    return true;
  const hints = sectionRest(messages, HEADER.hints, true);
  if (hints === undefined) return false;
  return hints
    .split("\n- [memory:")
    .slice(1)
    .filter((entry) => entry.startsWith("failure:"))
    .some((entry) => {
      const start = entry.indexOf(HINT_ROOT_CAUSE);
      if (start < 0) return false;
      const end = entry.indexOf(HINT_FIXED_FILES, start);
      return entry.slice(start, end < 0 ? undefined : end).includes(marker);
    });
}

/** Whether the previous reflection a build prompt shows ("Reflection on the failure") carries `marker`. */
function reflectionCarries(messages: ChatMessage[], marker: string): boolean {
  return sectionRest(messages, HEADER.reflection)?.includes(marker) ?? false;
}

function planOf(sim: Simulation): Plan {
  return {
    summary: `Simulated plan for ${sim.source}: write ${sim.path} as the goal says. No model is called; a simulation answers.`,
    acceptanceCriteria: [],
    steps: [`Write ${sim.path} as the goal says.`],
    files: [sim.path],
  };
}

function candidateOf(sim: Simulation, content: string, notes: string): Candidate {
  return { files: [{ path: sim.path, content }], tests: [], notes: `simulated (${sim.source}): ${notes}` };
}

function buildOf<T>(sim: Simulation, request: CompletionRequest<T>): Candidate {
  if (request.schemaName === "edits") {
    throw new LoopsmithError("bad_request", "a simulation answers inline tasks only");
  }
  const [first] = sim.wrong as [SimulatedWrong, ...SimulatedWrong[]];
  const previous = shownCandidate(sim, request.messages, HEADER.previous);
  if (previous === undefined) return candidateOf(sim, first.content, "a first attempt");
  if (previous.kind === "solution") return candidateOf(sim, sim.solution, "the fix again");
  const failing = previous.kind === "wrong" ? previous.wrong : first;
  const marker = causeMarker(failing.cause);
  if (hintCarries(request.messages, marker))
    return candidateOf(sim, sim.solution, "the fix, from a hint recalled from memory");
  if (reflectionCarries(request.messages, marker))
    return candidateOf(sim, sim.solution, "the fix, from the reflection");
  return candidateOf(sim, failing.content, "the same attempt again (the cause is not known)");
}

function found(sim: Simulation, wrong: SimulatedWrong, how: string): Reflection {
  return {
    rootCause: `${wrong.description} ${causeMarker(wrong.cause)}`,
    hypothesis: `Undoing the change (${wrong.cause}) makes the tests pass (simulated; ${how}).`,
    fixPlan: `In ${sim.path}, change it back: undo ${wrong.cause} (${wrong.description}).`,
  };
}

function reflectionOf<T>(sim: Simulation, request: CompletionRequest<T>): Reflection {
  const shown = shownCandidate(sim, request.messages, HEADER.candidate);
  if (shown?.kind === "solution") {
    return {
      rootCause: "the candidate is the reference solution; the failure is not in its code (simulated)",
      hypothesis: "The run failed for a reason outside the candidate.",
      fixPlan: `Keep ${sim.path} as it is.`,
    };
  }
  const wrong = shown?.kind === "wrong" ? shown.wrong : (sim.wrong[0] as SimulatedWrong);
  if (hintCarries(request.messages, causeMarker(wrong.cause)))
    return found(sim, wrong, "a hint recalled from memory names the cause");
  if (simulatedDraw(sim, request.context.iteration) < sim.findRate) return found(sim, wrong, "found unaided");
  return {
    rootCause: "the failing assertion does not point at the faulty line; cause not found (simulated)",
    hypothesis: "Something in the function's logic is wrong.",
    fixPlan: `Re-read ${sim.path} against the goal and the failing test (simulated; the cause was not found).`,
  };
}

/**
 * The lesson reply of a simulation: for each signature the lesson prompt lists, the rule "undo
 * the mutation" with the cause marker when the reflection it shows carries one (so a later
 * task that recalls the lesson knows the cause, as it would from the reflection), else a rule
 * without it.
 */
function lessonsOf<T>(request: CompletionRequest<T>): { lessons: Array<{ signature: string; rule: string }> } {
  const reflection = sectionRest(request.messages, HEADER.lessonReflection) ?? "";
  const marker = /\[simulated cause: [^\]\n]+\]/.exec(reflection)?.[0];
  const listed = sectionRest(request.messages, HEADER.lessonFailures) ?? "";
  const signatures = [...listed.matchAll(/^- iteration \d+, [^;]*; signature: (.+?)(?:; failing tests: .*)?$/gm)]
    .map((m) => (m[1] ?? "").trim())
    .filter(Boolean);
  const rule = marker
    ? `Undo the mutation the reflection found ${marker} (simulated lesson).`
    : "Re-read the function against the goal and the failing test (simulated lesson; the cause was not found).";
  return { lessons: [...new Set(signatures)].slice(0, 5).map((signature) => ({ signature, rule })) };
}

const REVIEW: Review = { approved: true, score: 0.9, findings: [] };

/**
 * The answer of a simulation to one request, as the JSON value the engine validates.
 * Shapes: `plan`/`spec` a `Plan` (files `[sim.path]`); `build` a `Candidate` with the one
 * file `sim.path` (the first wrong candidate on iteration 1; then the solution when the
 * prompt carries the failing candidate's marker in a recalled hint or the previous
 * reflection, else the same wrong candidate again); `reflect` a `Reflection` (found, with
 * the marker in `rootCause`, when a hint carries it or the draw is below `findRate`), or for
 * the lesson call (`schemaName` `lessons`) one lesson per listed signature, carrying the marker
 * when the reflection shown does;
 * `review` approved with score 0.9.
 * @throws LoopsmithError `bad_request` for the `improve` and `agent` roles and for repo-mode
 *   builds (`schemaName` `edits`)
 */
export function simulatedAnswer<T>(
  sim: Simulation,
  request: CompletionRequest<T>,
): Plan | Candidate | Reflection | Review | { lessons: Array<{ signature: string; rule: string }> } {
  switch (request.role) {
    case "plan":
    case "spec":
      return planOf(sim);
    case "build":
      return buildOf(sim, request);
    case "reflect":
      return request.schemaName === LESSON_SCHEMA_NAME ? lessonsOf(request) : reflectionOf(sim, request);
    case "review":
      return REVIEW;
    case "improve":
      throw new LoopsmithError("bad_request", "a simulation does not answer improvement hypotheses");
    case "agent":
      throw new LoopsmithError("bad_request", "the simulated provider has no agent mode");
  }
}

/**
 * The backend of one {@link Simulation}: info `{name: "simulated", model:
 * "simulated:<source>", scripted: true}`, price zero, every call zero tokens. Its answers
 * are {@link simulatedAnswer}'s, sent as JSON replies so they go through the engine's
 * validation like any model's. A re-ask gets the same answer.
 * @throws LoopsmithError `bad_request` from a call, as {@link simulatedAnswer}
 */
export function createSimulatedBackend(sim: Simulation): Backend {
  return {
    info: { name: "simulated", model: `simulated:${sim.source}`, scripted: true },
    price: { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 },
    open<T>(request: CompletionRequest<T>): Conversation {
      return replayConversation(request, () => simulatedAnswer(sim, request));
    },
  };
}
