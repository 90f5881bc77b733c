/**
 * Every NATS subject, stream, consumer and bucket name loopsmith uses. No subject string is
 * written anywhere else. Step subjects are `loopsmith.<service>.<verb>`.
 */
export const SUBJECT_PREFIX = "loopsmith";

/** Request/reply step subjects, served through `@nats-io/services` endpoints. */
export const Subjects = {
  architect: {
    status: "loopsmith.architect.status",
    cancel: "loopsmith.architect.cancel",
    /** An improvement run's state and reports. */
    improveStatus: "loopsmith.architect.improve_status",
  },
  builder: { build: "loopsmith.builder.build" },
  reviewer: { gate: "loopsmith.reviewer.gate", review: "loopsmith.reviewer.review" },
  executor: { run: "loopsmith.executor.run" },
  memory: {
    recall: "loopsmith.memory.recall",
    rememberFailure: "loopsmith.memory.remember_failure",
    attachFix: "loopsmith.memory.attach_fix",
    rememberSuccess: "loopsmith.memory.remember_success",
    recordTask: "loopsmith.memory.record_task",
    history: "loopsmith.memory.history",
    failures: "loopsmith.memory.failures",
    stats: "loopsmith.memory.stats",
    /** One recorded run (task, events, result), in parts. */
    run: "loopsmith.memory.run",
  },
  /** Task intake (JetStream work queue); the message id is the task id. */
  tasksSubmit: "loopsmith.tasks.submit",
  /** Improvement-run intake (JetStream work queue); the message id is the run id. */
  improveSubmit: "loopsmith.improve.submit",
  /** Events of all tasks (JetStream stream filter). */
  eventsAll: "loopsmith.events.>",
  /** Every rejected intake message's notice (`loopsmith.rejects.tasks`, `loopsmith.rejects.improve`). */
  rejectsAll: "loopsmith.rejects.>",
} as const;

/** Subject of one task's progress events. */
export function eventsSubject(taskId: string): string {
  return `${SUBJECT_PREFIX}.events.${taskId}`;
}

/**
 * Subject of the notices of rejected intake messages: a message on the submit subject that is
 * not JSON or fails its schema gets a `RejectNotice` here (core NATS, not stored).
 */
export function rejectsSubject(intake: "tasks" | "improve"): string {
  return `${SUBJECT_PREFIX}.rejects.${intake}`;
}

/**
 * Prefix of step heartbeat subjects (`loopsmith.beats.<nuid>`): a caller that wants a sign of
 * life names one in the request's heartbeat header, and the service publishes there while it
 * works. Not an inbox, so that NATS permissions can let services heartbeat to the conductor
 * without letting them publish into anyone's replies.
 */
export const BEATS_PREFIX = `${SUBJECT_PREFIX}.beats`;

/** JetStream and KV names. */
export const Streams = {
  tasks: "LOOPSMITH_TASKS",
  events: "LOOPSMITH_EVENTS",
  conductorConsumer: "conductor",
  taskStateBucket: "loopsmith_tasks",
  improve: "LOOPSMITH_IMPROVE",
  improveConsumer: "improver",
  /** Improvement runs: `<runId>` holds the run's state, `<runId>.gen.<N>` each generation's report. */
  improveStateBucket: "loopsmith_improve",
  /** Task records memory could not take yet (key = task id), written again until it does. */
  recordOutboxBucket: "loopsmith_record_outbox",
} as const;

/** `@nats-io/services` service names (one per service process). */
export const ServiceNames = {
  architect: "loopsmith-architect",
  builder: "loopsmith-builder",
  reviewer: "loopsmith-reviewer",
  executor: "loopsmith-executor",
  memory: "loopsmith-memory",
} as const;
export type ServiceName = keyof typeof ServiceNames;
