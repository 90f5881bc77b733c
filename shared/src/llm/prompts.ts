/**
 * Prompts as files: one versioned prompt per role in `shared/prompts/<role>.v<N>.md`, each
 * with a worked example, plus the helpers that render the parts of a user message: the
 * task brief, recalled memory (clearly marked as hints), a failure (output trimmed to a
 * token budget, head and tail kept) and a summary of older iterations.
 */
import { readFileSync } from "node:fs";
import type { FileChange } from "../contracts/common.js";
import type { MemoryUse } from "../contracts/lesson.js";
import type { Recall } from "../contracts/memory.js";
import type { FailureBrief, TaskBrief } from "../contracts/steps.js";
import type { Role } from "./types.js";
import { assetPath } from "../runtime/assets.js";
import { LoopsmithError } from "../runtime/errors.js";
import { cutText } from "../text/cut.js";

/** The prompt version each role uses now. Bump it with a new file, never edit an old one. */
export const PROMPT_VERSIONS: Readonly<Record<Role, number>> = {
  spec: 1,
  plan: 1,
  build: 1,
  review: 2,
  reflect: 1,
  improve: 1,
  agent: 1,
};

/** A loaded prompt: its system text (rules and worked example) and version. */
export interface Prompt {
  role: Role;
  version: number;
  system: string;
}

/** Repo mode's prompt versions (`<role>.repo.v<N>.md`): the roles whose rules differ there. */
export const REPO_PROMPT_VERSIONS: Readonly<Partial<Record<Role, number>>> = { plan: 2, build: 1 };

/**
 * DAG tasks' prompt versions (`<role>.dag.v<N>.md`): `plan` decomposes a goal into subtasks,
 * `reflect` picks the one subtask to re-open after a failed integration run.
 */
export const DAG_PROMPT_VERSIONS: Readonly<Partial<Record<Role, number>>> = { plan: 1, reflect: 1 };

/**
 * Loads the current prompt of `role` from `shared/prompts/` (with `mode: "repo"` or `"dag"`,
 * that variant when the role has one, else the common prompt).
 * @throws LoopsmithError `internal` when the file is missing or its header is wrong.
 */
export function loadPrompt(role: Role, mode: "inline" | "repo" | "dag" = "inline"): Prompt {
  const variant = mode === "repo" ? REPO_PROMPT_VERSIONS[role] : mode === "dag" ? DAG_PROMPT_VERSIONS[role] : undefined;
  const version = variant ?? PROMPT_VERSIONS[role];
  const file = assetPath("shared", "prompts", `${role}${variant ? `.${mode}` : ""}.v${version}.md`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new LoopsmithError("internal", `the prompt file for ${role} is missing: ${file}`, { cause: err });
  }
  const match = /^---\nrole: (\w+)\nversion: (\d+)\n---\n([\s\S]*)$/.exec(text);
  if (!match || match[1] !== role || Number(match[2]) !== version) {
    throw new LoopsmithError("internal", `the prompt file ${file} does not start with its role and version header`);
  }
  return { role, version, system: (match[3] ?? "").trim() };
}

/**
 * An ESTIMATE of the tokens of English text or code, 4 characters a token (OpenAI's and
 * Anthropic's rule of thumb; Anthropic publishes no tokenizer for its current models). Not a
 * count: it sizes prompt parts before a call; what a call used comes from the API's usage
 * fields, and a result that reports this figure says it is estimated.
 */
export function approxTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * Trims `text` to about `maxTokens` tokens (estimated as {@link approxTokens} does: 4
 * characters a token, at least 16 characters), keeping the head (1/3) and the tail (2/3), where
 * errors usually are, with the shared cut note (`@loopsmith/shared/text`) saying how many
 * characters went. The note counts against the budget.
 */
export function trimToTokens(text: string, maxTokens: number): string {
  return cutText(text, { max: Math.max(16, maxTokens * 4), headShare: 1 / 3 });
}

/** A file as a fenced block with its path. Each file is trimmed to `maxTokens`. */
export function renderFile(file: FileChange, maxTokens = 4_000): string {
  return `--- ${file.path}\n\`\`\`\n${trimToTokens(file.content, maxTokens)}\n\`\`\``;
}

/** A titled section; empty bodies give an empty string. */
export function section(title: string, body: string): string {
  return body.trim() ? `## ${title}\n${body.trim()}\n` : "";
}

/** The task as the model may see it (never hidden tests); in repo mode, the repository's map and files. */
export function renderTask(task: TaskBrief): string {
  if (task.repo) {
    const r = task.repo;
    return [
      section("Task", `Language: ${task.language}\n\n${task.goal}`),
      section(
        "Repository",
        [
          r.name ? `Name: ${r.name}` : "",
          `Test command (run at the repository root, network off): ${r.testCommand}`,
          r.failingAtBase.length
            ? `Failing before any change: ${r.failingAtBase.slice(0, 30).join(", ")}`
            : "All tests pass before any change.",
        ]
          .filter(Boolean)
          .join("\n"),
      ),
      section("Repository map (files and their top-level symbols, most relevant first)", r.map),
      section("Files (current text, in full)", r.files.map((f) => renderFile(f, 8_000)).join("\n")),
    ].join("\n");
  }
  return [
    section("Task", `Language: ${task.language}\n\n${task.goal}`),
    section("Starting files", task.files.map((f) => renderFile(f)).join("\n")),
    section(
      "Visible acceptance tests (fixed; do not change them)",
      task.acceptanceTests.map((f) => renderFile(f)).join("\n"),
    ),
  ].join("\n");
}

/** Tokens of code a recalled fix shows at most (all its files together). */
const FIX_CODE_TOKENS = 400;

/** The files of a recalled fix, each fenced and cut so that all of them fit {@link FIX_CODE_TOKENS}. */
function fixedFiles(files: Array<{ path: string; content: string }>): string {
  const each = Math.max(50, Math.floor(FIX_CODE_TOKENS / files.length));
  return files.map((file) => `  ${file.path}:\n\`\`\`\n${trimToTokens(file.content, each)}\n\`\`\``).join("\n");
}

/**
 * How a recalled memory's measured use reads in a hint, from the counts memory keeps for it
 * (`MemoryUse`, docs/MEMORY.md): `recalled in 3 finished tasks, 2 of them passed (utility
 * +0.25, s.e. 0.10)`; `not recalled by a finished task before` when none was shown it; `use not
 * measured` when the reply carries no use (a memory service that does not measure it). The
 * pass count is what followed the recall, not proof that it helped.
 */
export function memoryUseText(use: MemoryUse | undefined): string {
  if (!use) return "use not measured";
  if (use.recalledIn === 0) return "not recalled by a finished task before";
  const utility =
    use.utility === null
      ? ""
      : ` (utility ${use.utility >= 0 ? "+" : ""}${use.utility.toFixed(2)}, s.e. ${(use.stderr ?? 0).toFixed(2)})`;
  const tasks = `${use.recalledIn} finished task${use.recalledIn === 1 ? "" : "s"}`;
  return `recalled in ${tasks}, ${use.passedAfter} of them passed${utility}`;
}

/**
 * Recalled memory, marked as hints. Each failure carries its id (`memory:failure:<id>`) so
 * a transcript shows which recalled rows reached which prompt, the task it came from and its
 * measured use ({@link memoryUseText}); each success its id and the task it came from.
 */
export function renderHints(recall: Recall | undefined, maxTokens = 2_000): string {
  if (!recall || (recall.failures.length === 0 && recall.successes.length === 0)) return "";
  const lines: string[] = [
    "These are HINTS recalled from memory of earlier, similar tasks. They may not apply; use them only where they fit.",
  ];
  for (const f of recall.failures) {
    lines.push(
      `- [memory:failure:${f.id}] from task ${f.taskId}; ${memoryUseText(f.use)}; similarity ${f.similarity.toFixed(2)}; signature "${f.signature}"` +
        (f.failingTests.length ? `; failing tests ${f.failingTests.join(", ")}` : "") +
        `; goal: ${trimToTokens(f.goal.replace(/\s+/g, " "), 60)}` +
        (f.reflection
          ? `\n  root cause: ${f.reflection.rootCause}\n  fix that was planned: ${f.reflection.fixPlan}`
          : "") +
        (f.fixedBy?.files.length
          ? `\n  what then passed (iteration ${f.fixedBy.iteration}):\n${fixedFiles(f.fixedBy.files)}`
          : ""),
    );
  }
  for (const s of recall.successes) {
    lines.push(
      `- [memory:success:${s.id}] from task ${s.taskId}; similarity ${s.similarity.toFixed(2)}; solved: ${trimToTokens(s.goal.replace(/\s+/g, " "), 60)}`,
    );
  }
  return section("Hints from memory", trimToTokens(lines.join("\n"), maxTokens));
}

/** A failed run: status, signature, failing tests, findings and the trimmed output. */
export function renderFailure(failure: FailureBrief, maxOutputTokens = 1_500): string {
  const findings = failure.findings.map((f) => `- ${f.severity}: ${f.message}${f.path ? ` (${f.path})` : ""}`);
  return section(
    `What happened in iteration ${failure.iteration}`,
    [
      `Status: ${failure.status}`,
      `Error signature: ${failure.signature || "(none)"}`,
      failure.failingTests.length ? `Failing tests: ${failure.failingTests.join(", ")}` : "",
      findings.length ? `Findings:\n${findings.join("\n")}` : "",
      failure.output ? `Output (trimmed):\n\`\`\`\n${trimToTokens(failure.output, maxOutputTokens)}\n\`\`\`` : "",
    ]
      .filter(Boolean)
      .join("\n"),
  );
}

/**
 * Older iterations as one line each; only the last `keep` are listed in full, the rest are
 * counted, so a long task never overflows the context window.
 */
export function renderHistory(history: string[], keep = 5): string {
  if (history.length === 0) return "";
  const dropped = history.length - keep;
  const shown = dropped > 0 ? history.slice(dropped) : history;
  const lines = dropped > 0 ? [`(${dropped} earlier iterations not shown)`, ...shown] : shown;
  return section("Earlier iterations", lines.map((l) => `- ${l}`).join("\n"));
}
