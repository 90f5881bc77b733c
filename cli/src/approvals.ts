/**
 * `solve --dependencies ask` on the client side: the allowlists that approve packages ahead of
 * time, and the question put to the person at the terminal.
 *
 * - Allowlists: `.loopsmith/allowed-dependencies` in the repository (its work tree) and
 *   `$XDG_CONFIG_HOME/loopsmith/allowed-dependencies` (default `~/.config/loopsmith/…`, where
 *   the user's `config.json` is): one package name a line, `#` comments. They travel with the
 *   task (`repo.approvals.allowed`); the architect approves a change whose every package is on
 *   one list, recording the list's path as who approved.
 * - The question: with stdin and stdout on a terminal (and no `--json`) the task says a person
 *   answers (`repo.approvals.interactive`). When the architect asks (a `step` event whose
 *   `data.approval` is a waiting `ApprovalRequest`), this shows the manifests' diff and the
 *   packages, asks y/N, and sends the answer to `loopsmith.architect.approve`; the task,
 *   which waited at its gate, goes on. Without a terminal nothing asks, and the task stops
 *   with `needs_approval` as it always did.
 */
import { readFileSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  ApprovalRequest,
  DependencyDecision,
  packageLabel,
  parseAllowList,
  type AllowList,
  type TaskEvent,
  type TaskInput,
} from "@loopsmith/shared/contracts";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { printable } from "./terminal.js";

/** The allowlist's file name, in the repository's `.loopsmith/` and in the user's configuration folder. */
export const ALLOWLIST_FILE = "allowed-dependencies";

/** Where allowlists are looked for: the repository's first, then the user's. */
export function allowListPaths(repoRoot: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const configHome = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return [join(repoRoot, ".loopsmith", ALLOWLIST_FILE), join(configHome, "loopsmith", ALLOWLIST_FILE)];
}

/**
 * The allowlists that exist (a missing file is no list; an empty one approves nothing).
 * @throws LoopsmithError `bad_request` when a list exists but cannot be read
 */
export function readAllowLists(repoRoot: string, env: NodeJS.ProcessEnv = process.env): AllowList[] {
  const out: AllowList[] = [];
  for (const path of allowListPaths(repoRoot, env)) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw new LoopsmithError("bad_request", `cannot read the allowlist ${path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    out.push(parseAllowList(text, path));
  }
  return out;
}

/** Whether a person can be asked: stdin and stdout are terminals, and the output is not `--json`. */
export function canAsk(
  o: { json?: boolean },
  stdin: { isTTY?: boolean } = process.stdin,
  stdout: { isTTY?: boolean } = process.stdout,
): boolean {
  return !o.json && !!stdin.isTTY && !!stdout.isTTY;
}

/**
 * The task with its approvals (`repo.approvals`) when its dependency policy is `ask`: the
 * allowlists found for `repoRoot`, and whether a person answers ({@link canAsk}). Without
 * `repoRoot` (a task file: a replay) the task keeps the allowlists it carries, and only a
 * person at this terminal answers: a recorded task asked on a terminal does not wait for an
 * answer nobody can give. Other tasks are returned as they are.
 * @throws LoopsmithError `bad_request` as {@link readAllowLists}
 */
export function withApprovals(
  task: TaskInput,
  repoRoot: string | undefined,
  o: { json?: boolean },
  interactive = canAsk(o),
): TaskInput {
  if (!task.repo || task.repo.dependencies !== "ask") return task;
  const allowed = repoRoot ? readAllowLists(repoRoot) : (task.repo.approvals?.allowed ?? []);
  return { ...task, repo: { ...task.repo, approvals: { ...task.repo.approvals, interactive, allowed } } };
}

/** The approval request an event carries, undefined when it carries none (or one nobody waits on). */
export function approvalRequestOf(event: TaskEvent): ApprovalRequest | undefined {
  const parsed = ApprovalRequest.safeParse((event.data as { approval?: unknown } | undefined)?.approval);
  return parsed.success && parsed.data.waiting ? parsed.data : undefined;
}

/** What the person is shown before the question: the manifests' diff, then the changes one a line. */
export function approvalText(req: ApprovalRequest): string {
  return [
    "",
    "The change touches the dependencies:",
    printable(req.diff.trimEnd()),
    "",
    ...req.packages.map((p) => `  ${printable(packageLabel(p))}  (${printable(p.manifest)})`),
    "",
  ].join("\n");
}

/**
 * Asks `question` on the terminal: `yes` for `y` or `yes`, `no` for anything else typed.
 * Undefined (no answer) when `deadline` (epoch ms) passes or the input ends; Ctrl-C is passed
 * on to the process as SIGINT (which cancels the task) and answers nothing.
 */
export function askYesNo(
  question: string,
  deadline: number,
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stdout,
): Promise<"yes" | "no" | undefined> {
  return new Promise((resolve) => {
    const rl = createInterface({ input, output, terminal: true });
    let done = false;
    const finish = (answer: "yes" | "no" | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      rl.close();
      resolve(answer);
    };
    const timer = setTimeout(
      () => {
        output.write("\nno answer in time: the task stops for approval\n");
        finish(undefined);
      },
      Math.max(0, deadline - Date.now()),
    );
    rl.on("SIGINT", () => {
      finish(undefined);
      process.kill(process.pid, "SIGINT");
    });
    rl.on("close", () => finish(undefined));
    rl.question(question, (answer) => finish(/^\s*y(es)?\s*$/i.test(answer) ? "yes" : "no"));
  });
}

/** The name an answer is recorded under: the user's login name. */
export function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER || process.env.LOGNAME || "unknown";
  }
}

/**
 * The handler `solve` calls with each event of its task: on a waiting approval request it
 * asks the person and sends the answer. Undefined when nobody can be asked ({@link canAsk}).
 * A request is asked once, even when the task, resumed, asks it again.
 * @param write - where the diff is shown (stdout)
 */
export function approvalPrompter(
  nc: NatsConnection,
  owner: string,
  o: { json?: boolean },
  write: (text: string) => void = (t) => void process.stdout.write(t),
): ((event: TaskEvent) => Promise<void>) | undefined {
  if (!canAsk(o)) return undefined;
  const answered = new Map<string, "yes" | "no">();
  return async (event) => {
    const req = approvalRequestOf(event);
    if (!req) return;
    let answer = answered.get(req.requestId);
    if (!answer) {
      write(`${approvalText(req)}\n`);
      const deadline = req.until ? Date.parse(req.until) : Date.now();
      answer = await askYesNo("Approve these dependency changes? [y/N] ", deadline);
      if (!answer) return;
      answered.set(req.requestId, answer);
    }
    // A lost answer is said, not thrown: the task then stops with needs_approval when its wait ends.
    const reply = await call(
      nc,
      Endpoints.architect.approve,
      { v: 1, taskId: event.taskId, requestId: req.requestId, answer, by: userName(), at: new Date().toISOString() },
      { timeoutMs: 10_000, retries: 2, owner },
    ).catch((err: unknown) => err as Error);
    if (reply instanceof Error) write(`could not send the answer: ${printable(reply.message)}\n`);
    else
      write(
        reply.accepted
          ? `answer sent: ${answer === "yes" ? "approved" : "refused"}\n`
          : "the answer was not taken (the task no longer waits for it)\n",
      );
  };
}

/** The dependency decisions recorded in a task's events, in order (`data.approval` of state `decided`). */
export function dependencyDecisions(events: readonly TaskEvent[]): DependencyDecision[] {
  return events.flatMap((e) => {
    const parsed = DependencyDecision.safeParse((e.data as { approval?: unknown } | undefined)?.approval);
    return parsed.success ? [parsed.data] : [];
  });
}

/**
 * `loopsmith show`'s lines for the decisions: when, the answer, who (the user, or the
 * allowlist's path) and the changes. None when the task has none.
 */
export function decisionLines(events: readonly TaskEvent[], indent = "  "): string[] {
  const decisions = dependencyDecisions(events);
  if (!decisions.length) return [];
  return [
    `${indent}dependency decisions:`,
    ...decisions.map(
      (d) =>
        `${indent}  ${printable(d.at)}  ${d.answer === "yes" ? "approved" : "refused"} by ${d.source === "allowlist" ? "the allowlist " : ""}${printable(d.by)}: ${d.packages.map(printable).join(", ")}`,
    ),
  ];
}

/**
 * `report.md`'s section for the decisions (`## Dependency decisions`, one item each), through
 * the report's own escaping `md`. None when the task has none.
 */
export function decisionsMarkdown(events: readonly TaskEvent[], md: (text: string) => string): string[] {
  const decisions = dependencyDecisions(events);
  if (!decisions.length) return [];
  return [
    "## Dependency decisions",
    "",
    ...decisions.map(
      (d) =>
        `- ${md(d.at)}: ${d.answer === "yes" ? "approved" : "refused"} by ${d.source === "allowlist" ? "the allowlist " : ""}${md(d.by)}: ${d.packages.map(md).join(", ")}`,
    ),
    "",
  ];
}
