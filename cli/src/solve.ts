/**
 * `loopsmith solve`: build a task (goal string, task file or HumanEval record), make sure
 * NATS and the five services answer (starting what is missing), submit the task, show its
 * progress and print the result. Exit code 0 only when the tests pass; 130 when interrupted.
 */
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { Task } from "@loopsmith/shared/contracts";
import { createProvider, loadScript } from "@loopsmith/shared/llm";
import {
  repoModeOf,
  type DagProgress,
  type TaskInput,
  type TaskResult,
  type TaskScript,
} from "@loopsmith/shared/contracts";
import { repositoryRoot, type Config } from "@loopsmith/shared/runtime";
import { CliError, errorCodeOf, report } from "./errors.js";
import { ExitCode, exitCodeForResult } from "./exit-codes.js";
import { dagOf } from "./dag-view.js";
import { withChildEvents } from "./child-events.js";
import { resultText } from "./output.js";
import { solveProgress, type SolveProgress } from "./solve-progress.js";
import { intakePosition } from "./intake-queue.js";
import { checkBudgetPrices, shownNatsUrl } from "./preflight.js";
import { openClient, type Client } from "./client.js";
import { jsonLine, printable } from "./terminal.js";
import { colourEnabled } from "./ui/index.js";
import { exportRun } from "./runs.js";
import { approvalPrompter, withApprovals } from "./approvals.js";
import {
  finishRepo,
  prepareRepoTask,
  repoToSolve,
  uploadRecordedSnapshot,
  uploadSnapshot,
  type PreparedRepoTask,
} from "./solve-repo.js";
import type { IssuePrOpened, IssueTask, PrOutcome } from "./solve-issue.js";
import { steering } from "./steering.js";
import { buildTask, limitsOf, type SolveOptions } from "./solve-task.js";

export { buildTask, limitsOf, type SolveOptions } from "./solve-task.js";

/** Writes one line to stdout. */
function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * Runs `solve` end to end and prints its progress and result (`--json`: one JSON event per
 * line, then the result object, then, when the exit code is neither 0 nor 1, one error object).
 * @returns the exit code (see `ExitCode`): 0 the tests pass; 1 they fail or a limit stopped
 *   the task; 2 or 3 when the task ended with a configuration or infrastructure error; 130
 *   when it was cancelled
 * @throws LoopsmithError before submission: `config_invalid`, `bad_request`, `not_found`,
 *   `llm_auth` (exit 2), `unavailable` (exit 3); CliError `cancelled` when interrupted before
 *   a result came. After submission errors are reported here, with the task id.
 */
export async function solve(goal: string | undefined, o: SolveOptions, log: Logger): Promise<number> {
  if (!o.mergeWhen) return (await runSolve(goal, o, log)).code;
  // `--merge-when`: the pull request is followed once this run's stack has stopped; each
  // attempt a review asks for is a run of its own (solve-issue.ts).
  const { mergeIssuePr, prOpened, rerunOptions } = await import("./solve-issue.js");
  const seen: { opened?: IssuePrOpened } = {};
  const first = await runSolve(goal, o, log, (t, result, pr) => (seen.opened = prOpened(t, result, pr)));
  const { opened } = seen;
  if (!opened) return first.code;
  return mergeIssuePr(
    opened,
    { ...o, mergeWhen: o.mergeWhen },
    async (g, base, taskId) => (await runSolve(g, rerunOptions(o, opened.task.root, base, taskId), log)).result,
  );
}

/**
 * `solve`, returning the task's result instead of the exit code (what `replay` compares).
 * @returns the result, or undefined when none came (interrupted)
 * @throws as {@link solve}
 */
export async function solveForResult(
  goal: string | undefined,
  o: SolveOptions,
  log: Logger,
): Promise<TaskResult | undefined> {
  return (await runSolve(goal, o, log)).result;
}

/**
 * The configuration files of a solve: `--config`, and the repository whose file counts: the
 * one `--repo` names (its `.loopsmith/config.json` or `loopsmith.json`), else the one holding
 * the working directory (loadConfig's default).
 */
export function configFiles(o: SolveOptions): { file?: string; repoRoot?: string } {
  const repoRoot = o.repo ? (repositoryRoot(resolve(o.repo)) ?? resolve(o.repo)) : undefined;
  return { ...(o.config ? { file: o.config } : {}), ...(repoRoot ? { repoRoot } : {}) };
}

/** What a solve submits: the task, and in repo mode the prepared repository and, with `--issue`, the issue. */
interface SolveTask {
  task: TaskInput;
  prepared?: PreparedRepoTask;
  issueTask?: IssueTask;
}

/**
 * The task of a solve, refused before anything starts: `--issue` reads the issue from GitHub
 * and checks it against the local clone (the issue, fenced as untrusted text, is the goal of a
 * repo-mode task on that clone); repo mode (`--repo`, or a goal given inside a git work tree)
 * checks the repository and makes its snapshot; then the approvals and the audit.
 * @throws LoopsmithError/CliError `bad_request`, `config_invalid`, a GitHub error
 */
async function solveTask(givenGoal: string | undefined, o: SolveOptions, config: Config): Promise<SolveTask> {
  let goal = givenGoal;
  let issueTask: IssueTask | undefined;
  if (o.issue) {
    const { prepareIssue } = await import("./solve-issue.js");
    issueTask = await prepareIssue(o);
    goal = issueTask.goal;
  }
  const repo = issueTask ? issueTask.root : await repoToSolve(goal, o);
  const prepared: PreparedRepoTask | undefined = repo
    ? await prepareRepoTask(goal, { ...o, repo }, limitsOf(o))
    : undefined;
  if (prepared && issueTask) prepared.commitGoal = issueTask.commitGoal;
  let task: TaskInput = prepared ? prepared.task : buildTask(goal, o);
  // `--dependencies ask`: the allowlists, and whether a person at this terminal answers (approvals.ts).
  task = withApprovals(task, prepared?.repo.root, o);
  // The security audit: `--audit`, else the task file's own `audit`, else the configuration's `review.audit`.
  const audit = o.audit ?? task.audit ?? config.review.audit;
  if (audit) task = { ...task, audit };
  return { task, ...(prepared ? { prepared } : {}), ...(issueTask ? { issueTask } : {}) };
}

/**
 * Fails before starting anything when the provider cannot work (missing key, bad key). On a
 * stack the configuration names (NATS_URL: compose, a cluster) the services' own provider
 * answers, not this process's: there a task that needs a model and finds none ends with
 * `provider_unconfigured`, and `--script` replies travel with the task. A USD budget needs a
 * known price for every model the task can call (refused here; without one the user is told
 * the calls count as $0). A scripted run says so first.
 * @returns the `--script` replies, read
 * @throws LoopsmithError `llm_auth`, `config_invalid`, `bad_request` (an unreadable script)
 */
async function checkProvider(
  config: Config,
  o: SolveOptions,
  task: TaskInput,
  log: Logger,
): Promise<TaskScript | undefined> {
  const external = Boolean(config.natsUrl);
  const provider = external ? undefined : createProvider({ config, log });
  const script = o.script ? loadScript(resolve(o.script)) : undefined;
  if (!external) await checkBudgetPrices(config, task.limits, (m) => process.stderr.write(`loopsmith: ${m}\n`));
  if (provider?.info.scripted || (external && script)) {
    const banner = `SCRIPTED RUN: replies are replayed from ${config.llm.scriptPath ?? o.script}; no model is called.`;
    out(o.json ? jsonLine({ kind: "notice", scripted: true, message: banner }) : printable(banner));
  }
  if (provider?.verify) await provider.verify();
  return script;
}

/**
 * The task as the stack takes it: services this command did not start have their own
 * provider, so `--script` replies go with the task; services started here replay `--script`
 * from their configuration, and the task names the mode that script was written for
 * (repoModeOf), as it would carry it. Says when provider flags do not reach reused services.
 */
function taskForStack(
  task: TaskInput,
  script: TaskScript | undefined,
  stack: Client["stack"],
  flags: Record<string, unknown>,
): TaskInput {
  const reused = 5 - stack.started.length;
  let t = task;
  if (script && reused > 0) t = { ...t, script };
  if (t.repo && script && t.repo.mode === undefined)
    t = { ...t, repo: { ...t.repo, mode: repoModeOf({ repo: t.repo, script }) } };
  const ownLlm = { ...((flags.llm as Record<string, unknown> | undefined) ?? {}) };
  delete ownLlm.scriptPath;
  if (reused > 0 && Object.keys(ownLlm).length > 0) {
    process.stderr.write(
      `loopsmith: ${reused} service(s) were already running on ${shownNatsUrl(stack.natsUrl)} and keep their own configuration; --provider/--model/--base-url apply only to the ${stack.started.length} started now\n`,
    );
  }
  return t;
}

/**
 * Uploads the repository's snapshot (repo mode) and submits the task; a repeated publish is
 * deduplicated by its message id (the task id). Waiting in the intake queue says so at once.
 * @returns the submitted task's id
 */
async function submitSolve(
  client: Client,
  task: TaskInput,
  prepared: PreparedRepoTask | undefined,
  o: SolveOptions,
  progress: SolveProgress | undefined,
): Promise<string> {
  const { nc, owner } = client;
  if (prepared) await uploadSnapshot(nc, prepared, owner);
  else if (o.snapshotFrom && (task as Task).repo)
    await uploadRecordedSnapshot(nc, o.snapshotFrom, (task as Task).repo as NonNullable<Task["repo"]>, owner);
  const submitted = await client.submit(task);
  if (!o.json)
    out(`task ${submitted.taskId} submitted${submitted.duplicate ? " (a duplicate of a task already submitted)" : ""}`);
  if (progress && !submitted.duplicate) {
    const ahead = await intakePosition(nc, submitted.seq);
    if (ahead !== undefined) progress.queued(ahead);
  }
  return submitted.taskId;
}

/**
 * After the result: repo mode's branch or applied change, `--issue --pr`'s pull request,
 * `--out`'s files; then the exit code (a task that ended in error or was cancelled: the result
 * says so for people, and `--json` ends with one error object, like every other failure).
 */
async function finishSolve(
  client: Client,
  result: TaskResult,
  t: SolveTask,
  o: SolveOptions,
  onIssuePr?: (t: IssueTask, result: TaskResult, pr: PrOutcome) => void,
): Promise<{ code: number; result: TaskResult }> {
  const { prepared, issueTask } = t;
  if (prepared) {
    const done = await finishRepo(prepared, result, !!o.apply, { commitFailed: !!(issueTask && o.pr && o.prAlways) });
    out(o.json ? jsonLine({ kind: "repo", ...done }) : done.lines.join("\n"));
    if (issueTask && o.pr) {
      const { issuePullRequest } = await import("./solve-issue.js");
      const pr = await issuePullRequest(issueTask, result, done.branch, o).catch((err: unknown) => {
        throw new CliError(errorCodeOf(err), err instanceof Error ? err.message : String(err), {
          cause: err,
          taskId: result.taskId,
        });
      });
      out(o.json ? jsonLine({ kind: "pull_request", opened: pr.number !== undefined, ...pr }) : pr.lines.join("\n"));
      onIssuePr?.(issueTask, result, pr);
    }
  }
  if (o.out) {
    const written = await exportRun(client.nc, client.owner, result.taskId, o.out);
    if (!o.json) out(`wrote ${written.join(", ")}`);
  }
  const code = exitCodeForResult(result);
  if (code === ExitCode.ok || code === ExitCode.failed) return { code, result };
  const message =
    result.status === "cancelled" ? `task ${result.taskId} was cancelled` : (result.error?.message ?? result.message);
  return {
    code: report(
      {
        kind: "error",
        code: result.status === "cancelled" ? "cancelled" : (result.error?.code ?? "internal"),
        message,
        exitCode: code,
        taskId: result.taskId,
      },
      { json: o.json, quiet: !o.json },
    ),
    result,
  };
}

/** `solve`'s work: prints as it goes, returns the exit code and the result. */
async function runSolve(
  givenGoal: string | undefined,
  o: SolveOptions,
  log: Logger,
  onIssuePr?: (t: IssueTask, result: TaskResult, pr: PrOutcome) => void,
): Promise<{ code: number; result?: TaskResult }> {
  const { flags, config, childEnv } = await steering(o, configFiles(o));
  const solving = await solveTask(givenGoal, o, config);
  if (o.dryRun) {
    const { dryRun, dryRunText } = await import("./solve-dry-run.js");
    const planned = await dryRun(solving.task, solving.prepared, config);
    out(o.json ? jsonLine({ kind: "dry_run", ...planned }) : dryRunText(planned));
    return { code: ExitCode.ok };
  }
  const script = await checkProvider(config, o, solving.task, log);

  // One handler from the start: the first signal cancels a submitted task (the result is
  // still awaited and printed); a second one, or one before submission, stops waiting.
  // Either way everything this command started is stopped before it exits.
  const abort = new AbortController();
  let client: Client | undefined;
  let submittedId: string | undefined;
  let signals = 0;
  // The task's progress on stdout; a DAG task's tree is redrawn in place on a terminal.
  const progress: SolveProgress | undefined = o.json
    ? undefined
    : solveProgress(process.stdout, { color: colourEnabled(process.stdout) });
  const onSignal = (): void => {
    signals += 1;
    if (signals === 1 && client && submittedId) {
      const say = (): void =>
        void process.stderr.write("loopsmith: cancelling the task (press Ctrl-C again to stop waiting)\n");
      if (progress) progress.aside(say);
      else say();
      void client.cancel(submittedId, "interrupted").catch(() => abort.abort());
    } else {
      abort.abort();
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    client = await openClient({ config, log, env: childEnv, signal: abort.signal });
    if (abort.signal.aborted) throw new CliError("cancelled", "interrupted before the task was submitted");
    const task = taskForStack(solving.task, script, client.stack, flags);
    submittedId = await submitSolve(client, task, solving.prepared, o, progress);
    const { result, dag } = await follow(client, task.taskId, o, abort.signal, progress, log).catch((err: unknown) => {
      throw new CliError(errorCodeOf(err), err instanceof Error ? err.message : String(err), {
        cause: err,
        taskId: task.taskId,
      });
    });
    if (!result)
      throw new CliError("cancelled", `stopped waiting; task ${task.taskId} may still be running`, {
        taskId: task.taskId,
      });
    out(o.json ? jsonLine(result) : resultText(result, dag));
    return await finishSolve(client, result, solving, o, onIssuePr);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await client?.close();
  }
}

/**
 * Prints a task's events (`--json`: as they are, a DAG task's child tasks' events interleaved
 * as they come; else through `progress`, whose tree shows the children) until its result or
 * until `signal` aborts.
 * @returns the result (undefined when aborted first) and, for a DAG task, the subtasks its result event carries
 */
async function follow(
  client: Client,
  taskId: string,
  o: SolveOptions,
  signal: AbortSignal,
  progress: SolveProgress | undefined,
  log: Logger,
): Promise<{ result?: TaskResult; dag?: DagProgress }> {
  let result: TaskResult | undefined;
  let dag: DagProgress | undefined;
  const approve = approvalPrompter(client.nc, client.owner, o);
  const events = o.json
    ? withChildEvents(taskId, (id, stop) => client.events(id, stop), {
        signal,
        onChildError: (id, err) => log.warn({ taskId: id, err }, `cannot follow the events of child task ${id}`),
      })
    : client.events(taskId, signal);
  try {
    for await (const event of events) {
      if (event.taskId !== taskId) {
        // A child task's (--json only): printed as it is, its result too.
        out(jsonLine(event));
        continue;
      }
      if (o.json) {
        if (event.kind !== "result") out(jsonLine(event));
      } else {
        progress?.event(event);
      }
      // A dependency change the task waits on: asked here, on the terminal.
      if (approve) await approve(event);
      if (event.kind === "result" && event.result) {
        result = event.result;
        dag = dagOf(event);
      }
    }
  } finally {
    // With a result its report shows the subtasks; without one the last tree stays on screen.
    progress?.stop({ clear: result !== undefined && dag !== undefined });
  }
  return { ...(result ? { result } : {}), ...(dag ? { dag } : {}) };
}
