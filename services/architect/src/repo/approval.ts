/**
 * Repo mode, dependency policy `ask`: what happens to a candidate that changes a dependency
 * manifest (GATE, before the gate runs). In this order:
 * 1. an allowlist of the task (`repo.approvals.allowed`) names every changed package: approved,
 *    the decision recorded with the allowlist's path as who;
 * 2. a person already approved every one of these changes in this task: approved again;
 *    already refused one: refused again;
 * 3. else the change is asked about: an approval request event (`data.approval`, state
 *    `requested`, with the packages and the manifests' diff). When a person answers
 *    (`repo.approvals.interactive`: the CLI on a terminal) the task waits, up to
 *    `approvals.waitMs` and its own time limit, for the answer the `approve` endpoint
 *    writes (`approvals.ts`); without one it stops with `needs_approval`, as before.
 * Every decision is a `step` event whose `data.approval` is a `DependencyDecision`. A refusal
 * fails the iteration as the `reject` policy does: the builder is told to do without.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { allowedBy, packageLabel, type DependencyDecision, type PackageChange } from "@loopsmith/shared/contracts";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { HandBack } from "../durable/index.js";
import { approvalTexts, loopTexts, runTexts } from "../event-texts.js";
import { briefFromFindings } from "../failure.js";
import { timeLeftMs } from "../requests.js";
import type { ApprovalBox, ApprovalEntry } from "../approvals.js";
import type { PhaseOutcome, TaskRun } from "../run.js";
import type { TaskState } from "../state.js";
import { fileEntry, packageChanges } from "./packages.js";
import { baseReader, repoOf } from "./workspace.js";

/** How often a waiting task reads the answer, in ms. */
export const APPROVAL_POLL_MS = 500;
/** How often a waiting task checkpoints (which reads a cancel asked of another replica), in ms. */
const CHECKPOINT_MS = 5_000;
/** Most characters of the diff an approval request carries. */
const DIFF_CHARS = 20_000;

/** The package changes of the candidate in the manifests `paths` (an entry per file that names no package). */
export async function candidatePackages(
  s: TaskState,
  run: TaskRun,
  paths: readonly string[],
): Promise<PackageChange[]> {
  const read = await baseReader(s, run.steps);
  const files = new Map((s.candidate?.files ?? []).map((f) => [f.path, f.content]));
  return [...new Set(paths)].flatMap((path) => {
    const before = read(path);
    const after = files.get(path);
    const changes = packageChanges(path, before, after);
    return changes.length ? changes : [fileEntry(path, before, after)];
  });
}

/** A request's id: a hash of the changes asked about (the same changes, the same question). */
export function requestIdOf(labels: readonly string[]): string {
  return `deps-${createHash("sha256").update(labels.join("\n")).digest("hex").slice(0, 16)}`;
}

/**
 * The decision on a candidate whose dependency changes the `ask` policy holds up.
 * @returns undefined when approved (the gate runs); else how the phase ends: a refusal fails
 *   the iteration, no answer stops with `needs_approval`, a cancel stops the task
 * @throws HandBack when the conductor stops while the task waits (it resumes from its checkpoint and asks again)
 */
export async function approveDependencies(
  s: TaskState,
  run: TaskRun,
  decision: { reason: string; paths: string[] },
  diff: string,
): Promise<PhaseOutcome | undefined> {
  const approvals = repoOf(s.task).approvals;
  const changes = await candidatePackages(s, run, decision.paths);
  const labels = changes.map(packageLabel);
  const what = labels.join(", ");
  const requestId = requestIdOf(labels);
  const decided = async (d: Omit<DependencyDecision, "state" | "requestId" | "packages">): Promise<void> => {
    const approval: DependencyDecision = { state: "decided", requestId, packages: labels, ...d };
    await run.emit("step", approvalTexts.decided(what, d.by, d.at, d.answer === "yes"), {
      phase: "gate",
      data: { approval },
    });
  };
  const refused = (by: string): PhaseOutcome => {
    const failure = briefFromFindings(s.iteration, "blocked", [
      { severity: "blocker", message: approvalTexts.refused(what, by), rule: "repo-policy" },
    ]);
    return {
      next: "remember",
      patch: { failure: { ...failure, output: `${failure.output}\n${diff}`.slice(0, 8_000) } },
    };
  };

  const list = allowedBy(changes, approvals?.allowed ?? []);
  if (list) {
    await decided({ by: list.source, source: "allowlist", at: new Date().toISOString(), answer: "yes" });
    return undefined;
  }
  const owner = ownerOfTask(s.task);
  const box = run.steps.approvals;
  const earlier = box ? await box.entries(s.task.taskId, owner) : [];
  const no = earlier.find((e) => e.answer === "no" && e.packages.some((p) => labels.includes(p)));
  if (no) {
    await run.emit("step", approvalTexts.refused(what, no.by ?? "a person"), { phase: "gate" });
    return refused(no.by ?? "a person");
  }
  const yes = earlier.filter((e) => e.answer === "yes");
  const approvedLabels = new Set(yes.flatMap((e) => e.packages));
  if (yes.length && labels.every((l) => approvedLabels.has(l))) {
    await run.emit("step", approvalTexts.approvedBefore(what, [...new Set(yes.map((e) => e.by ?? "?"))].join(", ")), {
      phase: "gate",
    });
    return undefined;
  }

  const stop: PhaseOutcome = { stop: "needs_approval", message: loopTexts.needsApproval(decision.reason) };
  const waiting = !!(approvals?.interactive && box);
  const left = timeLeftMs(s);
  const waitMs = Math.max(0, Math.min(approvals?.waitMs ?? 0, left ?? Infinity));
  const startedAt = Date.now();
  const until = new Date(startedAt + waitMs).toISOString();
  if (waiting && box) await box.ask(s.task.taskId, owner, requestId, labels);
  await run.emit("step", approvalTexts.asking(what, waiting ? until : undefined), {
    phase: "gate",
    data: {
      approval: {
        state: "requested",
        requestId,
        packages: changes,
        diff: diff.slice(0, DIFF_CHARS),
        waiting,
        ...(waiting ? { until } : {}),
      },
    },
  });
  if (!waiting || !box) return stop;

  const answer = await waitForAnswer(run, box, { taskId: s.task.taskId, owner, requestId }, startedAt + waitMs);
  if (answer === "cancelled") return { stop: "cancelled", message: runTexts.cancelledOnRequest };
  if (!answer) {
    await run.emit("step", approvalTexts.noAnswer(what, Date.now() - startedAt), { phase: "gate" });
    return stop;
  }
  const by = answer.by ?? "a person";
  await decided({ by, source: "user", at: answer.at ?? new Date().toISOString(), answer: answer.answer ?? "no" });
  return answer.answer === "yes" ? undefined : refused(by);
}

/**
 * Reads the request's answer every {@link APPROVAL_POLL_MS} until there is one or `deadline`
 * (epoch ms) passes, checkpointing every few seconds (which reads a cancel asked of another
 * replica). @returns the answered entry, undefined at the deadline, `cancelled` on a cancel
 * @throws HandBack when the conductor stops meanwhile
 */
async function waitForAnswer(
  run: TaskRun,
  box: ApprovalBox,
  req: { taskId: string; owner: string; requestId: string },
  deadline: number,
): Promise<ApprovalEntry | "cancelled" | undefined> {
  let checkpointAt = Date.now();
  for (;;) {
    const answer = (await box.entries(req.taskId, req.owner)).find((e) => e.requestId === req.requestId && e.answer);
    if (answer) return answer;
    if (run.io.cancelled()) return "cancelled";
    if (run.io.stopping()) throw new HandBack(runTexts.handBack);
    if (Date.now() >= deadline) return undefined;
    if (Date.now() - checkpointAt >= CHECKPOINT_MS) {
      await run.record();
      checkpointAt = Date.now();
    }
    await sleep(APPROVAL_POLL_MS);
  }
}
