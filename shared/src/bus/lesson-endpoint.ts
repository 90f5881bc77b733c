/**
 * Memory's `remember_lessons` endpoint: the architect stores the lessons of a task that passed
 * after failing. Kept beside `Endpoints.memory` (same subject space, `loopsmith.memory.>`, so
 * the services' NATS permissions already cover it); memory serves it with the others.
 */
import { LessonsRecord, LessonsStored } from "../contracts/lesson.js";
import type { EndpointDef } from "./endpoints.js";

/** The subject of `remember_lessons`. */
export const REMEMBER_LESSONS_SUBJECT = "loopsmith.memory.remember_lessons";

/** Stores a task's lessons; replies with their ids. */
export const rememberLessonsEndpoint: EndpointDef<typeof LessonsRecord, typeof LessonsStored> = {
  name: "remember_lessons",
  subject: REMEMBER_LESSONS_SUBJECT,
  request: LessonsRecord,
  response: LessonsStored,
  owned: false,
};
