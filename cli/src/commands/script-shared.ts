/**
 * What `loopsmith script validate` uses of shared/: the schemas (`@loopsmith/shared/contracts`),
 * the providers' reader and the lesson reply (`/llm`) and the edit path check (`/workspace`),
 * loaded only when the command runs.
 */
import type * as Contracts from "@loopsmith/shared/contracts";
import type * as Llm from "@loopsmith/shared/llm";
import type * as Workspace from "@loopsmith/shared/workspace";
import type { z } from "zod";

/** The three entry points' exports in one object, with `LessonReply` as a plain zod schema. */
export type Shared = typeof Contracts & typeof Llm & typeof Workspace & { LessonReply: z.ZodType<unknown> };

/** Loads the three entry points (in parallel) and merges their exports into one object. */
export async function loadShared(): Promise<Shared> {
  const [contracts, llm, workspace] = await Promise.all([
    import("@loopsmith/shared/contracts"),
    import("@loopsmith/shared/llm"),
    import("@loopsmith/shared/workspace"),
  ]);
  return { ...contracts, ...llm, ...workspace };
}
