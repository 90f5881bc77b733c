/**
 * `loopsmith improve`: checks the repository, uploads its base snapshot, submits the run to
 * the architect's improver and follows it. As each generation's report arrives it is written
 * to `<run dir>/reports/gen-N.json` and, when the generation made a change, committed on its
 * own branch `loopsmith/improve/<runId>-gen-N` (a rejected one stays there for inspection);
 * an accepted one also moves the run's branch `loopsmith/improve/<runId>`, the parent of the
 * next generation. The user's branches move only with `--promote <branch>`, and only when
 * that branch is still at the base commit.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { GenerationReport, ImproveSummary, type ImproveSettings, type TaskEvent } from "@loopsmith/shared/contracts";
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import { createProvider } from "@loopsmith/shared/llm";
import { CliError } from "../errors.js";
import { checkBudgetPrices } from "../preflight.js";
import { jsonLine, printable } from "../terminal.js";
import { archiveCommit, branchCommit, checkRepo, commitPatch, git, setBranch, type CheckedRepo } from "../repo.js";
import { detectLanguage } from "../solve-repo.js";
import { steering, type Steering } from "../steering.js";
import { openClient, type Client } from "../client.js";
import { dashboardHtml, writeDashboard } from "./dashboard.js";
import {
  checkGithubAccess,
  githubClient,
  openPullRequest,
  parseGithubRepo,
  type GithubClient,
  type GithubRepo,
} from "../github/client.js";
import type { ImprovePull } from "./pull-requests.js";
import { prBody } from "./github.js";
import { metricsTable } from "./metrics.js";
import { readReports, reportTable, smallBenchmarkWarning, writeReport } from "./reports.js";
import { improveBase, improveSettings, improveSetup, repoImproveSection, type ImproveFlags } from "./settings.js";
import { pushBranch, remoteUrl } from "../github/push.js";

/** The run's branch (the accepted chain) and a generation's branch. */
export function runBranch(runId: string): string {
  return `loopsmith/improve/${runId}`;
}
/** A generation's branch. Not `<runBranch>/gen-N`: git cannot hold both `a/b` and `a/b/c` as branches. */
export function generationBranch(runId: string, n: number): string {
  return `loopsmith/improve/${runId}-gen-${n}`;
}

/** The directory of a run's reports, summary and dashboard: `outDir`, else `<dataDir>/improve/<runId>`. */
export function runDir(config: Config, runId: string, outDir?: string): string {
  return outDir ? resolve(outDir) : join(allRunsDir(config), runId);
}

/** The directory of the runs (`report --all`, `dashboard --all`): `dir`, else `<dataDir>/improve`, where runs go by default. */
export function allRunsDir(config: Config, dir?: string): string {
  return dir ? resolve(dir) : join(config.dataDir, "improve");
}

/**
 * The flags layer and the configuration of a run: `solve`'s {@link steering} (the same model
 * flags, precedence and sources), over `--config` and the files found from the working directory.
 * @throws LoopsmithError `config_invalid` for an invalid configuration
 */
export function improveSteering(flags: ImproveFlags): Promise<Steering> {
  return steering(flags, flags.config ? { file: flags.config } : {});
}

/** What the run did to the repository, for the terminal and the tests. */
export interface ImproveOutcome {
  summary: ImproveSummary;
  dir: string;
  branches: string[];
  promoted?: string;
  pullRequests: string[];
  /** With `--pr github`: each pull request opened, and where (what `--merge-when` follows). */
  pulls?: ImprovePull[];
  github?: { client: GithubClient; target: GithubRepo };
}

/**
 * The branches an earlier, unfinished run with this id left (newline-separated, "" for none),
 * and the error that refuses them: they would be mistaken for this run's, unless a stack that
 * stays up (NATS_URL) still has that run (then this command follows it).
 */
async function leftBranches(root: string, runId: string): Promise<{ left: string; leftover: () => LoopsmithError }> {
  const left = (
    await git(root).raw([
      "for-each-ref",
      "--format=%(refname:short)",
      `refs/heads/${runBranch(runId)}`,
      `refs/heads/${runBranch(runId)}-gen-*`,
    ])
  ).trim();
  const leftover = (): LoopsmithError =>
    new LoopsmithError(
      "repo_invalid",
      `an earlier run with the id ${runId} left branches that this run would mix with its own (${left.split("\n").join(", ")}): delete them (git branch -D …) or choose another --run-id`,
    );
  return { left, leftover };
}

/**
 * The provider must work before anything starts; a scripted run says so. A USD budget needs a
 * known price for every model the run can call, or it could not be kept: its hypotheses'
 * (`improve`) and its tasks'. On a stack NATS_URL names, the architect checks.
 * @returns whether the replies are scripted
 * @throws LoopsmithError `llm_auth`, `config_invalid`
 */
async function checkImproveProvider(
  flags: ImproveFlags,
  config: Config,
  settings: ImproveSettings,
  log: Logger,
): Promise<boolean> {
  const provider = createProvider({ config, log });
  const scripted = provider.info.scripted;
  if (scripted)
    emit(flags, {
      kind: "notice",
      scripted: true,
      message: `SCRIPTED RUN: replies are replayed from ${config.llm.scriptPath}; no model is called.`,
    });
  if (provider.verify) await provider.verify();
  if (!config.natsUrl)
    await checkBudgetPrices(
      config,
      { maxCostUsd: settings.budgetUsd },
      (m) => process.stderr.write(`loopsmith: ${m}\n`),
      "generation",
    );
  return scripted;
}

/** What following a run gathers: its reports, the branches and pull requests made of them, and its summary. */
interface Followed {
  summary?: ImproveSummary;
  reports: GenerationReport[];
  branches: string[];
  pullRequests: string[];
  pulls: ImprovePull[];
  /** Each generation's commit by its tree id (the base commit's by its own). */
  commits: Map<string, string>;
}

/** What {@link followRun} needs of the run. */
interface RunContext {
  flags: ImproveFlags;
  repo: CheckedRepo;
  runId: string;
  dir: string;
  settings: ImproveSettings;
  scripted: boolean;
  gh?: Awaited<ReturnType<typeof githubTarget>>;
}

/**
 * A generation's report: written to the run's folder, committed on its branch (not in a dry
 * run) and, accepted with `--pr github`, pushed and opened as a pull request.
 */
async function onGeneration(client: Client, run: RunContext, f: Followed, event: TaskEvent): Promise<void> {
  const { repo, runId, gh } = run;
  let report = GenerationReport.parse(event.data?.report);
  if (report.change?.patch.startsWith("(patch of "))
    report = await fullReport(client.nc, client.owner, runId, report.generation);
  f.reports.push(report);
  await writeReport(run.dir, report);
  if (run.settings.dryRun || !report.change) return;
  f.branches.push(...(await commitGeneration(repo.root, runId, report, f.commits)));
  if (!gh || report.decision.verdict !== "accepted") return;
  const branch = generationBranch(runId, report.generation);
  await pushBranch(repo.root, gh.remote, branch);
  const pr = await openPullRequest(gh.client, gh.target, {
    head: branch,
    base: gh.base,
    title: `loopsmith: ${report.hypothesis?.title ?? report.change.summary}`.slice(0, 250),
    body: prBody(report, runId, { scripted: run.scripted }),
  });
  f.pullRequests.push(pr.url);
  f.pulls.push({ generation: report.generation, ...pr });
}

/** Follows the run's events to its result, printing each, and gathers what {@link Followed} holds. */
async function followRun(client: Client, run: RunContext, signal: AbortSignal): Promise<Followed> {
  const { flags, settings } = run;
  const f: Followed = {
    reports: [],
    branches: [],
    pullRequests: [],
    pulls: [],
    commits: new Map([[run.repo.baseCommit, run.repo.baseCommit]]),
  };
  for await (const event of client.events(run.runId, signal)) {
    if (event.kind === "generation") await onGeneration(client, run, f, event);
    emit(flags, flags.json ? event : { message: event.message });
    // Once the calibration split the cases (before generation 1's report), say so when a
    // perfect fix of the selection set could never be significant at this run's levels.
    const calibration =
      event.kind === "step" ? ImproveSummary.shape.calibration.safeParse(event.data?.calibration) : undefined;
    if (calibration?.success && calibration.data) {
      const warning = smallBenchmarkWarning(calibration.data, settings);
      if (warning) emit(flags, { kind: "warning", message: warning });
    }
    if (event.kind === "result") {
      // A run the improver refused (its id is another client's run) ends with an error, no summary.
      if (event.data?.summary === undefined && event.data?.error) throw new CliError("bad_request", event.message);
      f.summary = ImproveSummary.parse(event.data?.summary);
    }
  }
  return f;
}

/** The end of a run: summary.json and the dashboard, `--promote`, and the table (or the JSON summary). */
async function finishRun(run: RunContext, f: Followed & { summary: ImproveSummary }): Promise<string | undefined> {
  const { flags, repo, runId, dir, summary } = { ...run, summary: f.summary };
  await writeFile(join(dir, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  await writeDashboard(
    join(dir, "dashboard.html"),
    dashboardHtml(runId, f.reports, {
      repo: repo.name,
      scripted: run.scripted,
      alpha: summary.alpha?.budget ?? run.settings.alpha,
    }),
  );
  let promoted: string | undefined;
  const head = flags.promote && summary.accepted.length ? f.commits.get(summary.head) : undefined;
  if (flags.promote && head) {
    await setBranch(repo.root, flags.promote, head, repo.baseCommit, `loopsmith: promote improvement run ${runId}`);
    promoted = flags.promote;
  }
  const { branches, pullRequests } = f;
  if (flags.json)
    out(jsonLine({ kind: "summary", ...summary, dir, branches, ...(promoted ? { promoted } : {}), pullRequests }));
  else
    out(
      [
        // A dry run measured its parent first: the figures, as `loopsmith metrics` prints them.
        ...(summary.parent
          ? [
              metricsTable(summary.parent, `the parent ${summary.parent.tree.slice(0, 12)}, measured in the sandbox:`),
              "",
            ]
          : []),
        reportTable(f.reports, summary),
        ...(promoted ? [`promoted ${promoted} to the last accepted generation`] : []),
        `reports, summary and dashboard.html in ${dir}`,
      ].join("\n"),
    );
  return promoted;
}

/**
 * Runs `loopsmith improve` end to end.
 * @throws LoopsmithError `repo_invalid` (repository), `bad_request` (settings), `config_invalid`
 *   (provider, GitHub token) before anything starts; CliError `cancelled` when interrupted
 */
export async function improve(flags: ImproveFlags, log: Logger): Promise<ImproveOutcome> {
  const { config, childEnv } = await improveSteering(flags);
  const base = improveBase(flags, config);
  const repo = await checkRepo(flags.repo ?? ".", base ? { base } : {});
  const section = repoImproveSection(repo.root);
  const settings: ImproveSettings = improveSettings(flags, config, section);
  const setupCommand = improveSetup(flags, config, section);
  const runId = flags.runId ?? `improve-${randomBytes(4).toString("hex")}`;
  const dir = runDir(config, runId, flags.out);
  const finished = await finishedRun(dir, runId);
  if (finished) return reopen(flags, repo, runId, dir, finished);
  const { left, leftover } = await leftBranches(repo.root, runId);
  if (left && !config.natsUrl) throw leftover();
  const self = await isLoopsmith(repo.root);
  // GitHub first: a missing or refused token fails before any generation runs.
  const gh = flags.pr === "github" ? await githubTarget(flags, repo.root) : undefined;
  const scripted = await checkImproveProvider(flags, config, settings, log);
  const snapshot = await archiveCommit(repo.root, repo.baseCommit);
  const language = await detectLanguage(repo.root, repo.baseCommit);

  let client: Client | undefined;
  const abort = new AbortController();
  const onSignal = (): void => abort.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    client = await openClient({ config, log, env: childEnv });
    await client.ensureImproveIntake();
    if (left) {
      const known = await call(
        client.nc,
        Endpoints.architect.improveStatus,
        { runId },
        { timeoutMs: 10_000, retries: 1, owner: client.owner },
      ).catch(() => undefined);
      if (!known?.state) throw leftover();
    }
    const submitted = await client.submitImprovement(
      { runId, repo, snapshot, ...(setupCommand !== undefined ? { setupCommand } : {}) },
      { language, settings, self },
    );
    emit(flags, {
      kind: "submitted",
      runId,
      duplicate: submitted.duplicate,
      message: `run ${runId} submitted${submitted.duplicate ? " (already submitted: following it)" : ""}; reports in ${dir}`,
    });
    await mkdir(join(dir, "reports"), { recursive: true });
    const run: RunContext = { flags, repo, runId, dir, settings, scripted, ...(gh ? { gh } : {}) };
    const followed = await followRun(client, run, abort.signal);
    const { summary } = followed;
    if (!summary)
      throw new CliError(
        "cancelled",
        `stopped following run ${runId}; a stack this command started stops with it (a stack that stays up, NATS_URL, goes on running it: loopsmith report ${runId} later)`,
      );
    const promoted = await finishRun(run, { ...followed, summary });
    return {
      summary,
      dir,
      branches: followed.branches,
      ...(promoted ? { promoted } : {}),
      pullRequests: followed.pullRequests,
      pulls: followed.pulls,
      ...(gh ? { github: { client: gh.client, target: gh.target } } : {}),
    };
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await client?.close();
  }
}

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The summary of a run that already finished in `dir`, if it did. */
async function finishedRun(dir: string, runId: string): Promise<ImproveSummary | undefined> {
  try {
    const summary = ImproveSummary.parse(JSON.parse(await readFile(join(dir, "summary.json"), "utf8")));
    return summary.runId === runId ? summary : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A run id that already finished here is not run again: its reports are shown, and
 * `--promote` still applies (to the run's branch, if it still points at the accepted head).
 */
async function reopen(
  flags: ImproveFlags,
  repo: { root: string; baseCommit: string },
  runId: string,
  dir: string,
  summary: ImproveSummary,
): Promise<ImproveOutcome> {
  emit(flags, {
    kind: "submitted",
    runId,
    duplicate: true,
    message: `run ${runId} already finished (${dir}/summary.json): not running it again`,
  });
  const reports = await readReports(dir);
  let promoted: string | undefined;
  const head = await branchCommit(repo.root, runBranch(runId));
  if (flags.promote && summary.accepted.length && head) {
    await setBranch(repo.root, flags.promote, head, repo.baseCommit, `loopsmith: promote improvement run ${runId}`);
    promoted = flags.promote;
  }
  if (flags.json)
    out(
      jsonLine({ kind: "summary", ...summary, dir, branches: [], ...(promoted ? { promoted } : {}), pullRequests: [] }),
    );
  else
    out(
      [
        reportTable(reports, summary),
        ...(promoted ? [`promoted ${promoted} to the last accepted generation`] : []),
      ].join("\n"),
    );
  return { summary, dir, branches: [], ...(promoted ? { promoted } : {}), pullRequests: [] };
}

/** Prints one line: JSON with --json, else the message. */
function emit(flags: ImproveFlags, value: Record<string, unknown> | { message: string }): void {
  if (flags.json) out(jsonLine(value));
  else if ("message" in value && typeof value.message === "string") out(printable(value.message));
}

/** A report whose patch was too large for its event, from the architect's KV copy. */
async function fullReport(
  nc: NatsConnection,
  owner: string,
  runId: string,
  generation: number,
): Promise<GenerationReport> {
  const { reports } = await call(
    nc,
    Endpoints.architect.improveStatus,
    { runId },
    { timeoutMs: 10_000, retries: 1, owner },
  );
  const found = reports.find((r) => r.generation === generation);
  if (!found) throw new CliError("internal", `the report of generation ${generation} of ${runId} is missing`);
  return found;
}

/**
 * Commits a generation's change on its parent's commit, on its own branch; an accepted one
 * also moves (or creates) the run's branch. Tree ids are mapped to the commits made here.
 */
async function commitGeneration(
  root: string,
  runId: string,
  report: GenerationReport,
  commits: Map<string, string>,
): Promise<string[]> {
  const parent = commits.get(report.parent);
  if (!parent || !report.change) return [];
  const subject =
    (report.hypothesis?.title ?? report.change.summary).split("\n")[0]?.slice(0, 72) ?? "loopsmith improvement";
  const message = `${subject}\n\n${report.decision.verdict} (${report.decision.reason}): ${report.decision.message}\n\nloopsmith improvement run ${runId}, generation ${report.generation}\n`;
  const branch = generationBranch(runId, report.generation);
  // A run followed again (a resubmitted id) replays its reports: the branch made then stays.
  const existing = await branchCommit(root, branch);
  const commit = existing ?? (await commitPatch(root, parent, report.change.patch, message));
  if (!existing)
    await setBranch(
      root,
      branch,
      commit,
      undefined,
      `loopsmith: improvement run ${runId} generation ${report.generation}`,
    );
  const made = [branch];
  if (report.decision.verdict === "accepted" && report.candidate) {
    commits.set(report.candidate, commit);
    const run = runBranch(runId);
    const at = await branchCommit(root, run);
    if (at !== commit)
      await setBranch(
        root,
        run,
        commit,
        at,
        `loopsmith: improvement run ${runId} accepts generation ${report.generation}`,
      );
    made.push(run);
  }
  return made;
}

/** True when the repository is loopsmith itself (its root package.json is named "loopsmith"). */
async function isLoopsmith(root: string): Promise<boolean> {
  try {
    return (JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { name?: string }).name === "loopsmith";
  } catch {
    return false;
  }
}

/** The GitHub repository, client and base branch for `--pr github`, checked now. */
async function githubTarget(flags: ImproveFlags, root: string) {
  const remote = flags.remote ?? "origin";
  const target = parseGithubRepo(flags.githubRepo ?? (await remoteUrl(root, remote)));
  const client = githubClient({});
  const { defaultBranch } = await checkGithubAccess(client, target);
  return { client, target, remote, base: defaultBranch };
}
