/**
 * The lesson prompt: what the reflect role is asked when a task passed after failing (turn its
 * failures into lessons, {@link LessonReply}), the fallback lesson when that reply is unreadable,
 * the scrubbing of a rule's task names and values, and the hint section that shows recalled
 * lessons to the model. Versioned here ({@link LESSON_PROMPT_VERSION}): bump it with any change
 * to {@link LESSON_SYSTEM}.
 */
import type { Recall } from "../contracts/memory.js";
import type { Reflection } from "../contracts/plan.js";
import { LESSON_RULE_MAX, type DistilledLesson, type LessonSource, type RecalledLesson } from "../contracts/lesson.js";
import { memoryUseText, section, trimToTokens } from "./prompts.js";

/** The lesson prompt's version, stored with every lesson the reflect role writes. */
export const LESSON_PROMPT_VERSION = 1;

/** The schema name the lesson call is made with (the simulated provider answers by it). */
export const LESSON_SCHEMA_NAME = "lessons";

/** The system prompt of the lesson call (role `reflect`). */
export const LESSON_SYSTEM = `You turn the failures of a finished programming task into lessons for other tasks.
The task failed one or more times and then passed. For each distinct error signature of its failures, write one lesson:
- "signature": the error signature exactly as given.
- "rule": the cause and the fix as one short rule (at most ${LESSON_RULE_MAX} characters) that another task with the same error can follow.
The rule must not name this task's functions, variables, files, or literal values: say "the loop bound", "the accumulator", "an off-by-one in a range", never "range(n)" or "total".
Example reply:
{"lessons": [{"signature": "AssertionError: assert <num> == <num>", "rule": "An off-by-one in a loop bound drops the last element: iterate up to and including the end when the goal says inclusive."}]}
Reply with JSON only.`;

/** What the lesson call shows: the task's failures (one per signature), the last reflection and the passing files. */
export interface LessonAsk {
  failures: ReadonlyArray<{ iteration: number; signature: string; failingTests: readonly string[]; status: string }>;
  reflection?: Reflection | undefined;
  passed: ReadonlyArray<{ path: string; content: string }>;
  passedAt: number;
}

/** The user part of the lesson call after the task: the failures, the reflection, what passed. */
export function renderLessonAsk(ask: LessonAsk): string {
  const seen = new Set<string>();
  const failures = ask.failures.filter((f) => (seen.has(f.signature) ? false : (seen.add(f.signature), true)));
  return [
    section(
      "Failures of this task (one per signature)",
      failures
        .map(
          (f) =>
            `- iteration ${f.iteration}, ${f.status}; signature: ${f.signature}` +
            (f.failingTests.length ? `; failing tests: ${f.failingTests.slice(0, 10).join(", ")}` : ""),
        )
        .join("\n"),
    ),
    ask.reflection
      ? section(
          "Reflection on the last failure",
          `Root cause: ${ask.reflection.rootCause}\nFix plan: ${ask.reflection.fixPlan}`,
        )
      : "",
    section(
      `What passed (iteration ${ask.passedAt})`,
      ask.passed.map((f) => `--- ${f.path}\n\`\`\`\n${trimToTokens(f.content, 1_000)}\n\`\`\``).join("\n"),
    ),
    "Reply with the lessons as structured output.",
  ]
    .filter(Boolean)
    .join("\n");
}

/**
 * Identifiers the candidate defines (functions, classes, variables, parameters, loop variables;
 * one-letter names left out): the task's own names.
 */
export function definedNames(code: string): Set<string> {
  const names = new Set<string>();
  const decl = /\b(?:def|function|class|const|let|var)\s+([A-Za-z_$][\w$]*)/g;
  for (const m of code.matchAll(decl)) if (m[1] && m[1].length > 1) names.add(m[1]);
  const params = /\b(?:def|function)\s+[A-Za-z_$][\w$]*\s*\(([^)]*)\)/g;
  for (const m of code.matchAll(params))
    for (const p of (m[1] ?? "").split(",")) {
      const name = /^\s*\*{0,2}([A-Za-z_$][\w$]*)/.exec(p)?.[1];
      if (name && name.length > 1 && name !== "self") names.add(name);
    }
  for (const m of code.matchAll(/\bfor\s+([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))?\s+in\b/g))
    for (const name of [m[1], m[2]]) if (name && name.length > 1) names.add(name);
  const assigned = /^\s*([A-Za-z_][\w]*)\s*(?:\+|-|\*)?=(?!=)/gm;
  for (const m of code.matchAll(assigned)) if (m[1] && m[1].length > 1) names.add(m[1]);
  return names;
}

/**
 * A rule free of the task's names and values: each of `names` becomes `<name>`, string
 * literals `<value>`, numbers of two or more digits `<num>`; whitespace collapsed, cut to
 * {@link LESSON_RULE_MAX} characters.
 */
export function scrubRule(rule: string, names: ReadonlySet<string>): string {
  let out = rule.replace(/"[^"\n]{0,200}"|'[^'\n]{0,200}'|`[^`\n]{0,200}`/g, "<value>");
  for (const name of [...names].sort((a, b) => b.length - a.length)) {
    out = out.replace(new RegExp(`(?<![\\w$])${name.replace(/\$/g, "\\$")}(?![\\w$])`, "g"), "<name>");
  }
  out = out
    .replace(/(?<![\w<])\d{2,}(?:\.\d+)?(?![\w>])/g, "<num>")
    .replace(/\s+/g, " ")
    .trim();
  return out.length > LESSON_RULE_MAX ? `${out.slice(0, LESSON_RULE_MAX - 1)}…` : out;
}

/** Whether a scrubbed rule still says something: 10 or more letters outside its placeholders. */
function meaningful(rule: string): boolean {
  return (rule.replace(/<(?:name|value|num)>/g, "").match(/\p{L}/gu)?.length ?? 0) >= 10;
}

/**
 * The lessons to store from a lesson reply: those whose signature is one of the task's
 * (`signatures`; when the task has only one, every lesson is taken as about it), each rule scrubbed of `names` ({@link scrubRule}), one per signature (the
 * first), and a rule the scrubbing left with fewer than 10 letters outside its placeholders dropped.
 */
export function acceptLessons(
  lessons: readonly DistilledLesson[],
  signatures: ReadonlySet<string>,
  names: ReadonlySet<string>,
  source: LessonSource,
): Array<DistilledLesson & { source: LessonSource }> {
  const out = new Map<string, DistilledLesson & { source: LessonSource }>();
  // A task with one signature: every lesson is about it, however the reply spelt it.
  const only = signatures.size === 1 ? [...signatures][0] : undefined;
  for (const l of lessons) {
    const signature = only ?? l.signature.trim();
    if (!signatures.has(signature) || out.has(signature)) continue;
    const rule = scrubRule(l.rule, names);
    if (meaningful(rule)) out.set(signature, { signature, rule, source });
  }
  return [...out.values()];
}

/**
 * The fallback lesson: the reflection on the task's last failure (the one the pass followed)
 * as a rule, `<root cause> Fix: <fix plan>`, scrubbed of `names`; undefined without a reflection.
 */
export function fallbackLesson(
  reflection: Reflection | undefined,
  signature: string,
  names: ReadonlySet<string>,
): (DistilledLesson & { source: LessonSource }) | undefined {
  if (!reflection || !signature) return undefined;
  const rule = scrubRule(`${reflection.rootCause} Fix: ${reflection.fixPlan}`, names);
  return meaningful(rule) ? { signature, rule, source: "fallback" } : undefined;
}

/** How a lesson's record reads in a hint: its measured use as every recalled memory's reads ({@link memoryUseText}). */
export function lessonRecord(lesson: RecalledLesson): string {
  return memoryUseText(lesson.use);
}

/**
 * Recalled lessons as a hint section (`## Lessons from memory`), each with its id
 * (`memory:lesson:<id>`), the task it came from, how it matched and its record; "" when none.
 */
export function renderLessons(recall: Recall | undefined, maxTokens = 1_000): string {
  const lessons = recall?.lessons ?? [];
  if (lessons.length === 0) return "";
  const lines = [
    "LESSONS recalled from memory: rules learned by earlier tasks that failed the same way and then passed. They may not apply; use them where they fit.",
    ...lessons.map(
      (l) =>
        `- [memory:lesson:${l.id}] from task ${l.taskId}; ${l.match === "signature" ? `for the error "${l.signature}"` : `a similar goal (similarity ${l.similarity.toFixed(2)}), error "${l.signature}"`}; ${lessonRecord(l)}\n  rule: ${l.rule}`,
    ),
  ];
  return section("Lessons from memory", trimToTokens(lines.join("\n"), maxTokens));
}
