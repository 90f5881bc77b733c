/**
 * PLAN of a generation: the architect's one hypothesis (role `improve`), from the repo map of
 * the parent, the benchmark cases the last measurement saw failing, and the earlier
 * generations' reports (what was tried, and why it was rejected).
 */
import { Hypothesis, type GenerationReport, type ImproveRequest, type Usage } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { loadPrompt, section, type Completion, type LlmProvider } from "@loopsmith/shared/llm";
import { quoteId } from "./bench-output.js";
import { metricsPromptSection } from "./metrics.js";

/** Earlier generations shown in the prompt, newest last. */
const REPORTS_SHOWN = 10;
/** Failing cases named in the prompt. */
const FAILING_SHOWN = 40;

/**
 * The reports as the model may see them. Cases of the confirmation set (`held`, and
 * any case a report marks `confirmation`) leave `bench.cases`, and a held-out id quoted in a
 * decision message (as `quoteId` quotes it) becomes `"(held out)"`. Counts stay: they say how
 * the held-out set fared, not which cases it holds. The stored reports are not changed.
 */
export function shownToModel(reports: readonly GenerationReport[], held: ReadonlySet<string>): GenerationReport[] {
  return reports.map((r) => {
    const hidden = (id: string): boolean => held.has(id);
    let message = r.decision.message;
    for (const id of held) if (message.includes(quoteId(id))) message = message.split(quoteId(id)).join('"(held out)"');
    return {
      ...r,
      decision: { ...r.decision, message },
      ...(r.bench
        ? { bench: { ...r.bench, cases: r.bench.cases.filter((c) => c.set !== "confirmation" && !hidden(c.case)) } }
        : {}),
    };
  });
}

/** The cases failing on the newest measured tree that is the current parent (empty when none was measured); never a confirmation case. */
export function failingOnParent(reports: readonly GenerationReport[], parentCommit: string): string[] {
  for (const r of [...reports].reverse()) {
    if (!r.bench) continue;
    const side = r.parent === parentCommit ? "parent" : r.candidate === parentCommit ? "candidate" : undefined;
    if (!side) continue;
    return r.bench.cases
      .filter((c) => c.set !== "confirmation" && (c[side].passes < c[side].runs || c[side].runs === 0))
      .map((c) => c.case);
  }
  return [];
}

/** One line per earlier generation: its hypothesis, decision and the figures behind it. */
export function renderReports(reports: readonly GenerationReport[]): string {
  return reports
    .slice(-REPORTS_SHOWN)
    .map((r) => {
      const stat = r.statistic
        ? ` (fixed ${r.statistic.fixed}, broken ${r.statistic.broken}, p=${r.statistic.pValue.toPrecision(3)})`
        : "";
      return `- ${r.runId} gen ${r.generation}: "${r.hypothesis?.title ?? "no hypothesis"}" → ${r.decision.verdict} (${r.decision.reason})${stat}: ${r.decision.message}`;
    })
    .join("\n");
}

/**
 * Asks for the hypothesis of generation `generation`.
 * @param taskId - the generation's task id; the scripted provider replays by it
 * @throws LoopsmithError from the provider (`llm_bad_reply` after the re-ask, `llm_auth`, …), its
 *   code and `retryable` kept and its message prefixed with the call it failed in
 */
export async function hypothesize(
  provider: LlmProvider,
  input: {
    request: ImproveRequest;
    generation: number;
    taskId: string;
    map: string;
    reports: readonly GenerationReport[];
    /** Rejected generations of earlier runs from the same parent tree. */
    earlier: readonly GenerationReport[];
    failing: readonly string[];
    protectedGlobs: readonly string[];
    check: string;
    budgetUsd?: number;
  },
): Promise<{ hypothesis: Hypothesis; usage: Usage }> {
  const { request, generation } = input;
  const s = request.settings;
  const user = [
    section("Goal", s.goal),
    section(
      "Repository",
      `${request.repo.name ?? "(unnamed)"} at ${request.repo.baseCommit.slice(0, 12)}; language ${request.language}`,
    ),
    section("Check (must keep passing)", s.check ?? input.check),
    section(
      "Benchmark",
      s.bench === undefined
        ? metricsPromptSection(s, input.reports)
        : `${s.bench} (${s.benchFormat}; up to ${s.repeats} run(s) per side; accepted when a one-sided paired test on the cases you are shown says better at this generation's share of the run's error budget ${s.alpha}, with at most ${s.tolerance} case(s) broken${s.confirmationFraction > 0 || s.holdout.length > 0 ? ", AND held-out cases you are not shown confirm the improvement: a change that special-cases the shown inputs is rejected as overfit" : ""})`,
    ),
    section(
      "Cases failing on the parent",
      input.failing.slice(0, FAILING_SHOWN).join("\n") +
        (input.failing.length > FAILING_SHOWN ? `\n… and ${input.failing.length - FAILING_SHOWN} more` : ""),
    ),
    section("Earlier generations of this run", renderReports(input.reports)),
    section("Rejected attempts of earlier runs on this same tree (do not repeat them)", renderReports(input.earlier)),
    section("Protected paths (a change touching one is rejected)", input.protectedGlobs.join("\n")),
    section("Repository map", input.map),
    `This is generation ${generation}. Reply with one hypothesis as structured output.`,
  ].filter(Boolean);
  let reply: Completion<Hypothesis>;
  try {
    reply = await provider.complete({
      role: "improve",
      system: loadPrompt("improve").system,
      messages: [{ role: "user", content: user.join("\n") }],
      schema: Hypothesis,
      schemaName: "hypothesis",
      context: { taskId: input.taskId, iteration: generation, callsBefore: 0 },
      budget: input.budgetUsd !== undefined ? { remainingUsd: input.budgetUsd } : {},
    });
  } catch (err) {
    // The generation's report says only the error: it must say which call failed (code and retry kept).
    if (!(err instanceof LoopsmithError)) throw err;
    throw new LoopsmithError(err.code, `asking for the hypothesis (role improve): ${err.message}`, {
      cause: err,
      retryable: err.retryable,
      details: err.details,
    });
  }
  return { hypothesis: reply.value, usage: reply.usage };
}

/** The goal of the generation's repo-mode task: the hypothesis, the direction and the rules. */
export function taskGoal(request: ImproveRequest, generation: number, h: Hypothesis, check: string): string {
  return [
    `Improvement run ${request.runId}, generation ${generation}: ${h.title}`,
    h.rationale && `Why: ${h.rationale}`,
    h.expected && `Expected effect on the benchmark: ${h.expected}`,
    h.files.length ? `Files: ${h.files.join(", ")}` : "",
    `Direction of the run: ${request.settings.goal}`,
    `Make this one change. The check (\`${check}\`) must keep passing. Do not touch the benchmark, the tests, the test or CI configuration, or the dependencies.`,
  ]
    .filter(Boolean)
    .join("\n\n");
}
