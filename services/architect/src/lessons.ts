/**
 * LESSONS, when a task passed after failing (called by SCORE before the task stops): the reflect
 * role turns its failures into lessons (the lesson prompt, `LessonReply`), one per distinct
 * signature, each rule scrubbed of the names the candidate defines; memory stores them with the
 * signature and the task they came from. An unreadable lesson reply (or steps without the lesson
 * call) falls back to the reflection on the last failure, the one the pass followed; a provider
 * that has no lesson reply (`provider_unconfigured`: a script whose entries ended) gives one step
 * line and no lesson. Advisory throughout: nothing here stops or fails the task.
 */
import { hasCode } from "@loopsmith/shared/runtime";
import {
  LESSON_PROMPT_VERSION,
  acceptLessons,
  definedNames,
  fallbackLesson,
  type DistilledLesson,
  type LessonSource,
} from "@loopsmith/shared/llm";
import { stepKey } from "./requests.js";
import type { TaskRun } from "./run.js";
import type { TaskState } from "./state.js";

/** The event texts of this step. */
export const lessonTexts = {
  learned: (n: number, source: LessonSource) =>
    `learned ${n} lesson${n === 1 ? "" : "s"} from this task's failures (${source === "reflect" ? "written by the reflect role" : "from the last reflection"})`,
  unusable: (why: string) => `the lesson reply could not be used (${why}); the lesson is the last reflection's`,
  none: "no lesson: the lesson reply was unusable and there was no reflection to fall back on",
  noneFit:
    "no lesson in it was about one of this task's error signatures with a rule left once the task's names were scrubbed",
  noReply: (why: string) => `no lesson: the provider has no lesson reply (${why}); nothing was stored`,
} as const;

/**
 * The lessons of a task that passed after failing, stored in memory; does nothing when memory
 * is off, the task never failed, there is no candidate, or the steps cannot store lessons.
 * Emits a `step` event with the stored lessons (`data.lessons`, `data.lessonIds`), or a warning
 * when there was nothing to learn from.
 */
export async function distilLessons(s: TaskState, run: TaskRun): Promise<void> {
  const remember = run.steps.rememberLessons;
  if (s.task.memory === "off" || s.failures.length === 0 || !s.candidate || !remember) return;
  const signatures = new Set(s.failures.map((f) => f.signature.trim()).filter(Boolean));
  if (signatures.size === 0) return;
  const names = definedNames([...s.candidate.files, ...s.candidate.tests].map((f) => f.content).join("\n"));
  let lessons: Array<DistilledLesson & { source: LessonSource }> = [];
  const distil = run.steps.distil;
  if (distil) {
    try {
      const reply = await run.llm("reflect", "lesson", (head) =>
        distil({
          ...head,
          ...(s.recall ? { recall: s.recall } : {}),
          ask: {
            failures: s.failures.map((f) => ({
              iteration: f.iteration,
              signature: f.signature,
              failingTests: f.failingTests,
              status: f.status,
            })),
            reflection: s.reflection,
            passed: s.candidate?.files ?? [],
            passedAt: s.iteration,
          },
        }),
      );
      lessons = acceptLessons(reply.value.lessons, signatures, names, "reflect");
      if (lessons.length === 0)
        await run.emit("warning", lessonTexts.unusable(lessonTexts.noneFit), {
          phase: "score",
        });
    } catch (err) {
      // A provider with no lesson reply (a script whose entries ended) has nothing to teach:
      // one step line, no fallback lesson made up from the reflection.
      if (hasCode(err, "provider_unconfigured")) {
        await run.emit("step", lessonTexts.noReply(err.message), { phase: "score" });
        return;
      }
      // An unreadable reply is counted and reported as any LLM step's; any other error (the
      // budget, a provider down) only loses the reflect role's wording of the lesson.
      if (hasCode(err, "llm_bad_reply")) await run.llmFailure(err, "reflect");
      else await run.emit("warning", lessonTexts.unusable((err as Error)?.message ?? String(err)), { phase: "score" });
    }
  }
  if (lessons.length === 0) {
    const last = s.failures[s.failures.length - 1];
    const fallback = last ? fallbackLesson(s.reflection, last.signature.trim(), names) : undefined;
    if (!fallback) {
      await run.emit("warning", lessonTexts.none, { phase: "score" });
      return;
    }
    lessons = [fallback];
  }
  const stored = await run.safely(() =>
    remember({
      v: 1,
      taskId: s.task.taskId,
      iteration: s.iteration,
      idempotencyKey: stepKey(s, "lessons"),
      language: s.task.language,
      goal: s.task.goal,
      lessons,
      promptVersion: LESSON_PROMPT_VERSION,
      ...(s.task.owner ? { owner: s.task.owner } : {}),
    }),
  );
  if (stored)
    await run.emit("step", lessonTexts.learned(lessons.length, lessons[0]?.source ?? "fallback"), {
      phase: "score",
      data: { lessonIds: stored.ids, lessons },
    });
}
