/**
 * Every human-readable text a task's run shows: the messages of its events (`TaskEvent.message`),
 * its stop messages (`TaskResult.message`) and its history lines. The phases and the run's
 * mechanics take their words from here and build none inline. Tests, the CLI and people
 * match on some of them: change one only on purpose. Pure: nothing here does I/O.
 */
import { RUN_LIMIT_MULTIPLE } from "@loopsmith/shared/contracts";
import type {
  FailureBrief,
  Finding,
  InstructionsUse,
  ProviderInfo,
  SubtaskState,
  Usage,
} from "@loopsmith/shared/contracts";
import type { AuditFinding, AuditRecord } from "@loopsmith/shared/contracts";
import { failureLine } from "./failure.js";
import { findingPlace } from "./tampering.js";

/**
 * A duration for people, from ms: `1.5 s` (under 10 s, to a tenth), `45 s`, then whole seconds
 * in minutes and hours: `1 min 30 s`, `30 min`, `2 h 5 min`.
 */
export function durationText(ms: number): string {
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0))} s`;
  const total = Math.round(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  return [h ? `${h} h` : "", m ? `${m} min` : "", sec ? `${sec} s` : ""].filter(Boolean).join(" ");
}

/** `n thing` or `n things`. */
const plural = (n: number, word: string): string => `${word}${n === 1 ? "" : "s"}`;
/** The first line of a text (`""` for none). */
const firstLine = (text: string): string => text.split("\n")[0] ?? "";
/** A finding as a blocker list shows it: its message and, when it has one, its place. */
const findingText = (f: Finding): string => `${f.message}${f.path ? ` (${findingPlace(f)})` : ""}`;

/** The texts of the conductor (`conductor.ts`): a task taken, refused, or ended by an error. */
export const conductorTexts = {
  accepted: (language: string, parent?: { taskId: string; subtaskId: string }) =>
    `task accepted (${language}${parent ? `; subtask ${parent.subtaskId} of ${parent.taskId}` : ""})`,
  taken: (taskId: string) => `the task id ${taskId} belongs to another client's task: submit with another id`,
};

/** The texts of the run's mechanics (`run.ts`): stops, usage, memory, the sandbox and the score. */
export const runTexts = {
  /** Prefix of a stop caused by an error or a limit. */
  stopped: (why: string) => `stopped: ${why}`,
  cancelled: "cancelled",
  cancelledOnRequest: "cancelled on request",
  /** The message of a final state resumed without one. */
  finished: "finished",
  handBack: "the conductor is stopping; the task resumes from its checkpoint",
  /** The stop of a task past its wall-clock limit (`limits.timeLimitMs`), after `ranMs` since it was accepted. */
  timeLimit: (limitMs: number, ranMs: number, iterations: number) =>
    `stopped: the task's time limit of ${durationText(limitMs)} passed (ran ${durationText(ranMs)}, ${iterations} ${plural(iterations, "iteration")})`,
  fallback: (role: string, from: { name: string; model: string; code: string }, label: string) =>
    `${role}: ${from.name}:${from.model} failed (${from.code}); ${label} answered instead`,
  usage: (role: string, u: Usage, total: Usage) =>
    `${role}: ${u.calls} ${plural(u.calls, "call")}, ${u.inputTokens}+${u.outputTokens} tokens, $${u.costUsd.toFixed(4)}; task total $${total.costUsd.toFixed(4)}`,
  /** The provider label a usage event and the result's `providers` carry. */
  providerLabel: (p: Pick<ProviderInfo, "name" | "model">) => `${p.name}:${p.model}`,
  memoryUnavailable: (why: string) => `memory is unavailable: ${why}`,
  replyUnreadable: (role: string, why: string) => `the ${role} reply could not be read: ${why}`,
  changeUncomputable: (why: string) => `the change could not be computed: ${why}`,
  scoring: "scoring on the hidden tests",
  scoreSandboxFailed: (reason?: string) => `the sandbox failed while scoring (${reason ?? "unknown"}); trying again`,
};

/** The texts of the one-candidate loop's phases (`phases.ts`). */
export const loopTexts = {
  memoryOff: "memory is off for this task: nothing recalled",
  recalling: "recalling similar past tasks",
  recalled: (failures: number, successes: number) => `recalled ${failures} failures and ${successes} successes`,
  recalledSimilar: (failures: number) => `recalled ${failures} similar failures`,
  planning: "planning",
  plan: (summary: string) => `plan: ${summary}`,
  tooBig: "the goal is too big for one change: planning it as subtasks",
  iteration: (n: number, max: number) => `iteration ${n} of at most ${max}`,
  building: "building a candidate",
  candidate: (files: readonly string[], tests: readonly string[]) =>
    `candidate: ${files.join(", ")}${tests.length ? ` + tests ${tests.join(", ")}` : ""}`,
  repoCandidate: (summary: string | undefined, changed: readonly string[], deleted: readonly string[]) =>
    `candidate: ${summary ?? "edits"} (${[...changed, ...deleted.map((p) => `-${p}`)].join(", ") || "no change"})`,
  editsFailed: (message: string) => `the edits could not be applied: ${firstLine(message)}`,
  /** Told to the builder after a blocked candidate (repo mode). */
  blockedNotApplied:
    "That change was blocked, so it is NOT in the tree: your edits apply to the tree as it was before it (the files shown are that tree's).",
  gate: "static safety gate",
  gateNothing: "gate passed (nothing to check: the change only deletes files)",
  gateBlocked: (blockers: readonly Finding[]) => `gate blocked the candidate: ${blockers.map(findingText).join("; ")}`,
  gatePassed: (findings: number) => `gate passed (${findings} findings)`,
  gateConcerns: (findings: number, concerns: readonly Finding[], review: boolean) =>
    `gate passed (${findings} findings) with possible evaluation tampering; the candidate goes to review${review ? "" : " although the task's review is off"}: ${concerns
      .slice(0, 5)
      .map((f) => `${f.message} (${findingPlace(f)})`)
      .join("; ")}${concerns.length > 5 ? ` and ${concerns.length - 5} more` : ""}`,
  /** Repo mode's policy decision before the gate: why, then the diff of the files it is about. */
  policy: (reason: string, diff: string) => `${reason}\n${diff}`,
  needsApproval: (reason: string) => `stopped for approval: ${reason}`,
  reviewing: (concerns: boolean) =>
    concerns ? "reviewing the candidate (the gate saw possible evaluation tampering)" : "reviewing the candidate",
  reviewUnreadConcerns: (concerns: number) =>
    `review: the reply could not be read, so nothing cleared the gate's ${concerns} ${plural(concerns, "tampering concern")}; the candidate is not run (a candidate with tampering concerns runs only after a review approves it)`,
  review: (approved: boolean, score: number, blockers: readonly Finding[]) => {
    const why = blockers.map(findingText).join("; ");
    return `review: ${approved ? "approved" : "not approved"}, score ${score.toFixed(2)}${why ? `: ${why}` : ""}`;
  },
  executing: "running the tests in the sandbox",
  ignored: (paths: readonly string[]) =>
    `the candidate's ${paths.join(", ")} ${paths.length === 1 ? "was" : "were"} not used: a candidate may not configure the test runner or replace the acceptance tests`,
  commandNotFound: (reason: string) => `stopped: the test command is not found in the sandbox: ${reason}`,
  sandboxFailed: (reason?: string) => `the sandbox failed (${reason ?? "unknown"}); not counted against the candidate`,
  sandboxGaveUp: (n: number, reason?: string) => `stopped: the sandbox failed ${n} times in a row: ${reason ?? ""}`,
  executed: (
    iteration: number,
    status: string,
    failing: readonly string[],
    shown: readonly string[],
    total: number,
    durationMs: number,
  ) =>
    `iteration ${iteration}: ${status}${failing.length ? `; failing tests: ${shown.join(", ")}${failing.length > shown.length ? ` and ${failing.length - shown.length} more` : ""}` : ""} (${total} tests, ${Math.round(durationMs)} ms)`,
  passed: (iterations: number, reviewedConcerns = 0) =>
    `passed after ${iterations} ${plural(iterations, "iteration")}${reviewedConcerns ? ` (the gate's ${reviewedConcerns} ${plural(reviewedConcerns, "tampering concern")} cleared by an approving review)` : ""}`,
  remembering: "remembering the failure",
  stored: (signature: string) => `failure stored in memory (signature: ${signature})`,
  replanning: (same: number) => `the same error ${same} times in a row; re-planning once`,
  stuck: (same: number, signature: string) => `stopped: the same error signature ${same} times in a row (${signature})`,
  /** `last`: the last iteration's failure, said in one line (`failureLine`). */
  maxIterations: (iterations: number, last?: Pick<FailureBrief, "status" | "failingTests" | "output">) =>
    `stopped after ${iterations} iterations without passing${last ? `; the last: ${failureLine(last)}` : ""}`,
  reflecting: "reflecting on the failure",
  reflection: (rootCause: string) => `reflection: ${rootCause}`,
  /** History lines (one per finished iteration, in the state and the reflection prompts). */
  historyPassed: (iteration: number) => `iteration ${iteration}: passed`,
  historyFailed: (iteration: number, status: string, signature: string, failing: readonly string[]) =>
    `iteration ${iteration}: ${status} (${signature})${failing.length ? ` failing ${failing.join(", ")}` : ""}`,
};

/** The texts of dependency approvals (`repo/approval.ts`); `what` is the changes as `packageLabel` writes them, joined. */
export const approvalTexts = {
  allowlisted: (what: string, source: string) => `dependencies approved by the allowlist ${source}: ${what}`,
  approvedBefore: (what: string, by: string) => `dependencies approved earlier (by ${by}): ${what}`,
  asking: (what: string, until: string | undefined) =>
    until
      ? `asking for approval of the dependency change: ${what}; waiting for an answer until ${until}`
      : `approval needed for the dependency change: ${what}`,
  decided: (what: string, by: string, at: string, yes: boolean) =>
    `dependencies ${yes ? "approved" : "refused"} by ${by} at ${at}: ${what}`,
  refused: (what: string, by: string) =>
    `the dependency change (${what}) was refused by ${by}: solve the task without changing the dependencies`,
  noAnswer: (what: string, waitedMs: number) =>
    `no answer to the approval request in ${Math.round(waitedMs / 1000)} s: ${what}`,
};

/** The texts of repo mode's PREPARE (`repo/phases.ts`). */
export const repoTexts = {
  preparing: (baseCommit: string) => `preparing the repository at ${baseCommit.slice(0, 12)}`,
  noTestCommand:
    "stopped: no test command was given and none was detected (no pytest configuration or test_*.py files, no package.json test script); give one with --test-cmd",
  commands: (files: number, testCommand: string, detectedWhy: string | undefined, setupCommand: string) =>
    `${files} files; tests: ${testCommand}${detectedWhy === undefined ? "" : ` (detected: ${detectedWhy})`}; setup: ${setupCommand || "none"}`,
  instructions: (use: InstructionsUse) =>
    `project instructions: ${use.path} (${use.truncated ? `cut to ${use.shownBytes} of ${use.bytes} bytes` : `${use.bytes} bytes`}) go into every prompt of the task`,
  baselineSandboxFailed: (reason?: string) =>
    `the sandbox failed on the baseline run (${reason ?? "unknown"}); trying again`,
  baselineGaveUp: (n: number, reason?: string) =>
    `stopped: the sandbox failed ${n} times on the baseline run: ${reason ?? ""}`,
  setupFailed: (message?: string) => `the setup command failed; the tests run without it: ${message ?? ""}`,
  runLimit: (limitMs: number, why: "given" | "timeout" | "derived", baselineMs: number, floorMs: number) =>
    why === "given"
      ? `test runs limited to ${limitMs / 1000} s (--test-timeout)`
      : why === "timeout"
        ? `test runs limited to ${limitMs / 1000} s (the baseline run did not finish within it)`
        : `test runs limited to ${limitMs / 1000} s (${RUN_LIMIT_MULTIPLE}x the baseline's ${(baselineMs / 1000).toFixed(1)} s, at least ${floorMs / 1000} s)`,
  baseline: (baseCommit: string, status: string, total: number, failing: readonly string[], durationMs: number) =>
    `baseline at ${baseCommit.slice(0, 12)}: ${status} (${total} tests, ${failing.length} failing${failing.length ? `: ${failing.slice(0, 10).join(", ")}` : ""}; ${Math.round(durationMs)} ms)`,
};

/** The texts of a DAG task's phases (`dag/phases.ts`). */
export const dagTexts = {
  needsRepo: "stopped: a decomposed task needs repo mode (give a repository; an empty one works)",
  planning: "planning subtasks",
  planned: (subtasks: number, summary: string) => `${subtasks} subtasks: ${summary}`,
  refused: (ask: number, problems: readonly { message: string }[]) =>
    `the plan of subtasks was refused (${ask === 1 ? "asking again" : "for the second time"}): ${problems.map((p) => p.message).join("; ")}`,
  invalidPlan: (problems: readonly { message: string }[]) =>
    `stopped: the plan of subtasks failed validation twice: ${problems.map((p) => p.message).join("; ")}`,
  unreadablePlan: (why: string) => `the reply was not a plan of subtasks: ${why}`,
  /** One line about a subtask's move, for its event. */
  move: (s: SubtaskState) => {
    const why =
      s.reason && s.reason !== "passed"
        ? ` (${s.reason}${s.message ? `: ${s.message.split("\n")[0]?.slice(0, 200)}` : ""})`
        : "";
    // A running subtask with a reason: its attempt just failed, and another follows after the backoff.
    if (s.status === "running")
      return why
        ? `subtask ${s.id}: attempt ${s.attempts} failed${why}; trying again`
        : `subtask ${s.id}: running, attempt ${s.attempts}`;
    return `subtask ${s.id}: ${s.status}${why}`;
  },
  progress: "subtask progress",
  scheduling: (open: number, total: number, parallel: number) =>
    `running ${open} of ${total} subtasks, ${parallel} at a time`,
  timeUsedUp: (limitMs: number) => `the task's time limit of ${durationText(limitMs)} passed`,
  timeLimitStop: (limitMs: number, running: readonly string[], passed: readonly string[]) =>
    `stopped: the task's time limit of ${durationText(limitMs)} passed; cancelled: ${running.join(", ") || "none"}; built: ${passed.join(", ") || "none"}`,
  /** A subtask stopped by a budget: `why` is its own stop, which names the limit (`budgetStopText`). */
  budgetStop: (subtask: string, why: string, passed: readonly string[]) => {
    const stop = firstLine(why).replace(/^stopped: /, "");
    const named = stop.includes(`subtask ${subtask} `) ? stop : `subtask ${subtask}: ${stop}`;
    return `stopped: ${named}; built: ${passed.join(", ") || "none"}`;
  },
  subtasksFailed: (failed: readonly SubtaskState[], cancelled: readonly string[], passed: readonly string[]) =>
    `stopped: subtask ${failed.map((t) => `${t.id} (${t.reason ?? "failed"}: ${(t.message ?? "").split("\n")[0]?.slice(0, 200)})`).join(", ")} gave up; cancelled: ${cancelled.join(", ") || "none"}; built: ${passed.join(", ") || "none"}`,
  integrating: (changed: number) => `integrating: the task's tests on the merged tree (${changed} files changed)`,
  integrationSandboxFailed: (reason?: string) =>
    `the sandbox failed on the integration run (${reason ?? "unknown"}); trying again`,
  integrationCouldNotRun: (why: string) => `stopped: the integration run could not run: ${why}`,
  integrated: (status: string, total: number, failed: number) =>
    `integration: ${status} (${total} tests, ${failed} failing)`,
  passed: (subtasks: number) => `passed: ${subtasks} subtasks built and the task's tests pass on the merged tree`,
  mergedFails: (failing: readonly string[], status: string, open: boolean) =>
    `stopped: the task's tests fail on the merged tree (${failing.slice(0, 10).join(", ") || status}) and ${open ? "the iteration limit is reached" : "every subtask was re-opened once already"}`,
  reflecting: "reflecting on the integration failure",
  reflection: (subtaskId: string, rootCause: string) => `reflection: re-open ${subtaskId}: ${rootCause}`,
  badChoice: (chosen: string | undefined, known: boolean) =>
    `stopped: the task's tests fail on the merged tree and ${chosen !== undefined ? `the reflection chose "${chosen}", which ${known ? "was re-opened before" : "is not a subtask"}` : "the reflection could not be read"}`,
  reopenedGoal: (goal: string, rootCause: string, fixPlan: string) =>
    `${goal}\n\nThe integration run failed after this subtask passed: ${rootCause}\nFix: ${fixPlan}`,
  historyIntegration: (iteration: number, status: string, reopened: string) =>
    `integration ${iteration}: ${status}; re-opened ${reopened}`,
};

/** The texts of agent mode's loop (`agent/explore.ts`): its events, its stops, and what the model is told. */
export const agentTexts = {
  exploring: (maxSteps: number) => `exploring the repository with tools (at most ${maxSteps} steps)`,
  sessionOpened: (executorId: string, files: number, ms: number) =>
    `session open on executor ${executorId} (${files} files, ${Math.round(ms)} ms)`,
  sessionLost: (executorId: string, why: string) =>
    `the session's executor ${executorId} is gone (${why}); opening the session again`,
  /** One step of the transcript: the tool, its arguments in short, the observation's first line. */
  step: (step: number, tool: string, args: string, observation: string, isError: boolean) =>
    `step ${step}: ${tool}${args ? ` ${args}` : ""} → ${isError ? "error: " : ""}${firstLine(observation).slice(0, 200)}`,
  /** What the model is told when it answered without calling a tool. */
  nudge:
    "You answered without calling a tool. Call one of the tools; call submit with a one-line summary when the change is done.",
  noTool: "(no tool call)",
  unknownTool: (name: string, tools: readonly string[]) => `unknown tool "${name}"; the tools are ${tools.join(", ")}`,
  badArgs: (name: string, why: string) => `the arguments of ${name} are not valid:\n${why}`,
  /** The stuck rule's redirect, appended as a user message. */
  redirect: (rule: "repeat_call" | "repeat_output", tool: string, count: number) =>
    rule === "repeat_call"
      ? `You have called ${tool} with the same arguments ${count} times on the same tree; it will not show anything new. Try something else: another tool, other arguments, or a different change. Doing it again ends the attempt.`
      : `The same failing output came back ${count} times. What you are doing is not changing the outcome; try a different approach. Repeating it again ends the attempt.`,
  stuckStop: (rule: "repeat_call" | "repeat_output", tool: string) =>
    `stopped: the agent repeated itself after it was redirected (${rule === "repeat_call" ? `the same ${tool} call again` : "the same failing output again"})`,
  editApplied: (paths: readonly string[], diff: string) => `applied; changed ${paths.join(", ") || "nothing"}\n${diff}`,
  editBlocked: (reason: string) => `refused: ${reason}`,
  editNeedsApproval: (reason: string) => `applied, but ${reason}`,
  editBreaksSyntax: (problems: readonly string[]) =>
    `refused: the edit leaves a file that no longer parses (it parsed before); nothing was applied:\n${problems.join("\n")}`,
  submitted: (summary: string) => `submitted: ${summary}`,
  afterSubmit: "not run: submit ended the loop",
  stepsRanOut: (steps: number, edits: boolean) =>
    `the step budget (${steps} steps) ran out; ${edits ? "the candidate goes to the verdict as it is" : "no file was changed"}`,
  noChange: (why: string) => `the agent changed no file (${why}): nothing to run`,
  toolFailed: (tool: string, why: string) => `${tool} failed: ${why}`,
  needsAgentSteps:
    "stopped: agent mode needs the builder's turn and the executor's session steps, which this architect does not have",
  /** The previous iteration, as the next loop's opening message tells it. */
  previous: (
    iteration: number,
    status: string,
    failing: readonly string[],
    output: string,
    reflection: { rootCause: string; hypothesis: string; fixPlan: string } | undefined,
    tree: { kept: readonly string[]; blocked?: string },
  ) =>
    [
      `Iteration ${iteration} failed (${status})${failing.length ? `; failing tests: ${failing.slice(0, 20).join(", ")}` : ""}.`,
      output ? `Its output:\n${output}` : "",
      reflection
        ? `Reflection on it: root cause: ${reflection.rootCause}\nHypothesis: ${reflection.hypothesis}\nFix plan: ${reflection.fixPlan}`
        : "",
      tree.blocked !== undefined ? `That change was blocked and is NOT in the tree: ${tree.blocked}` : "",
      tree.kept.length
        ? `${tree.blocked !== undefined ? "The tree holds the last change that ran" : "Your change from that iteration is still in the tree"} (changed: ${tree.kept.join(", ")}).`
        : "The tree is the base commit's.",
    ]
      .filter(Boolean)
      .join("\n\n"),
};

/** An audit finding in one line: severity, source and rule, place, message. */
const auditLine = (f: AuditFinding): string =>
  `${f.severity} ${f.source} ${f.rule} (${f.file}${f.line ? `:${f.line}` : ""}): ${f.message}`;

/** The texts of the security audit (`audit.ts`). */
export const auditTexts = {
  auditing: "auditing the candidate's security (static tools in the sandbox, then the audit model)",
  noModel: "the audit model is not available here: the audit has the static tools' findings only",
  audited: (r: AuditRecord) => {
    const high = r.findings.filter((f) => f.severity === "high");
    const tools =
      r.static.status === "ok"
        ? r.static.tool
        : `${r.static.tool} ${r.static.status}${r.static.reason ? ` (${r.static.reason})` : ""}`;
    const model = r.modelRead ? "" : "; the model's reply could not be read";
    const head = `audit: ${r.findings.length} ${plural(r.findings.length, "finding")}, ${high.length} high; ${tools}${model}`;
    return high.length ? `${head}; blocked: ${high.slice(0, 5).map(auditLine).join("; ")}` : head;
  },
  warnings: (findings: readonly AuditFinding[]) =>
    `audit: ${findings.length} lower-severity ${plural(findings.length, "finding")}, the candidate runs: ${findings
      .slice(0, 5)
      .map(auditLine)
      .join("; ")}${findings.length > 5 ? ` and ${findings.length - 5} more` : ""}`,
};

/** A calibration as its event line shows it (`improveTexts.calibrated`). */
interface CalibrationLine {
  selection: readonly string[];
  confirmation: readonly string[];
  flaky: readonly string[];
  source: string;
  seed: number;
}

/**
 * The texts of an improvement run (`improve/run.ts`, `improve/generation.ts` and the files
 * beside it): its events and its stops. The CLI's reports and the end-to-end tests read some.
 */
export const improveTexts = {
  accepted: (what: string, repo: string) => `run accepted: ${what} on ${repo}`,
  acceptedWhat: (measureOnly: boolean, generations: number) =>
    measureOnly ? "measuring (no generation)" : `${generations} generation(s)`,
  taken: (runId: string) => `the run id ${runId} belongs to another client's run: submit with another id`,
  handBack: "the improver is stopping; the run resumes from its checkpoint",
  measuringParent: (tree: string, bench: boolean) =>
    `measuring the parent ${tree}: ${bench ? "the benchmark, once" : "the quality metrics"}`,
  parentMeasured: (tree: string, lines: readonly string[]) => `the parent ${tree}: ${lines.join("; ")}`,
  measuredOnly: (tree: string, ms: number) =>
    `measured ${tree} in ${Math.round(ms / 100) / 10} s; no generation (measure only)`,
  calibrating: (runs: number) => `calibration: the benchmark ${runs} time(s) on the parent`,
  calibrated: (c: CalibrationLine, fraction: number) =>
    `calibration: ${c.selection.length} selection and ${c.confirmation.length} confirmation case(s) (${c.source === "holdout" ? "--holdout" : `${Math.round(fraction * 100)}% held out, stratified, seed ${c.seed}`}); ${c.flaky.length} flaky case(s) left out of the test${c.flaky.length ? `: ${c.flaky.slice(0, 10).join(", ")}${c.flaky.length > 10 ? ", …" : ""}` : ""}`,
  noConfirmation: "--holdout matches no case: the run has no confirmation set",
  noSelection: "--holdout matches every case: no selection case is left, so no generation can be accepted",
  cannotGoOn: (why: string) => `the run cannot go on: ${why}`,
  cancelledBefore: (n: number) => `cancelled before generation ${n}`,
  completed: (generations: number, accepted: readonly number[]) =>
    `${generations} generation(s): ${accepted.length} accepted${accepted.length ? ` (${accepted.join(", ")})` : ""}`,
  generationStart: (n: number, of: number, parent: string) => `generation ${n} of ${of} from ${parent}`,
  hypothesis: (n: number, title: string) => `generation ${n}: ${title}`,
  implementing: (n: number, taskId: string) => `generation ${n}: implementing (task ${taskId})`,
  measuringMetrics: (n: number, repeats: number) =>
    `generation ${n}: measuring the quality metrics of parent and candidate (${repeats} run(s) each)`,
  benchmarking: (n: number, repeats: number) =>
    `generation ${n}: benchmarking parent and candidate (${repeats} run(s) each)`,
  generationEnded: (n: number, d: { verdict: string; reason: string; message: string }) =>
    `generation ${n}: ${d.verdict} (${d.reason}) — ${d.message}`,
};
