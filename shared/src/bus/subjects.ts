/**
 * Every NATS subject, stream, consumer and bucket name loopsmith uses. No subject string is
 * written anywhere else. Step subjects are `loopsmith.<service>.<verb>`.
 */
export const SUBJECT_PREFIX = "loopsmith";

/**
 * Request/reply step subjects, served through `@nats-io/services` endpoints. A client's
 * endpoints (the architect's, memory's reads) are called on `<subject>.<owner>`: see `bus.ts`.
 */
export const Subjects = {
  architect: {
    status: "loopsmith.architect.status",
    cancel: "loopsmith.architect.cancel",
    /** One task's events so far, read from the events stream for its owner. */
    events: "loopsmith.architect.events",
    /** An improvement run's state and reports. */
    improveStatus: "loopsmith.architect.improve_status",
    /** A person's answer to a dependency approval request (`contracts/approval.ts`). */
    approve: "loopsmith.architect.approve",
  },
  builder: { build: "loopsmith.builder.build", turn: "loopsmith.builder.turn" },
  reviewer: {
    gate: "loopsmith.reviewer.gate",
    review: "loopsmith.reviewer.review",
    /** The security audit's model (`Task.audit`). */
    audit: "loopsmith.reviewer.audit",
  },
  executor: {
    run: "loopsmith.executor.run",
    /** Agent mode's session container: open on any replica, then call and close on its own `.<executorId>`. */
    sessionOpen: "loopsmith.executor.session_open",
    sessionCall: "loopsmith.executor.session_call",
    sessionClose: "loopsmith.executor.session_close",
  },
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
  /**
   * Task intake (JetStream work queue), one subject per owner: `loopsmith.tasks.submit.<owner>`
   * (see {@link tasksSubmitSubject}); the message id is `<owner>:<taskId>`.
   */
  tasksSubmit: "loopsmith.tasks.submit",
  /** Improvement-run intake (JetStream work queue), `loopsmith.improve.submit.<owner>`; the message id is `<owner>:<runId>`. */
  improveSubmit: "loopsmith.improve.submit",
  /** Events of all tasks (JetStream stream filter): `loopsmith.events.<owner>.<taskId>`. */
  eventsAll: "loopsmith.events.>",
  /** Every rejected intake message's notice (`loopsmith.rejects.<intake>.<owner>`). */
  rejectsAll: "loopsmith.rejects.>",
} as const;

/**
 * The owner of a task: the client it belongs to. A client submits, watches, cancels and reads
 * back only its own tasks, because every subject it uses for them carries its owner token and
 * the NATS permission matrix lets each client user publish and subscribe only with its own
 * token (`nats-permissions.ts`). The owner is taken from the subject a message arrived on,
 * never from its body. Letters, digits, `_` and `-`, 1–64 characters (one subject token).
 */
export const OWNER_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * The owner of a client that names none: the default client user's name (`client`), so a
 * stack without NATS users and the default compose client see the same tasks.
 */
export const DEFAULT_OWNER = "client";

/** The owner of a task or run (`DEFAULT_OWNER` for one submitted before tasks carried owners). */
export function ownerOfTask(task: { owner?: string | undefined }): string {
  return task.owner ?? DEFAULT_OWNER;
}

/**
 * Checks an owner token.
 * @throws Error naming the rule when `owner` is not one subject token of {@link OWNER_PATTERN}
 */
export function checkOwner(owner: string): string {
  if (!OWNER_PATTERN.test(owner))
    throw new Error(`the owner "${owner}" is not valid: use 1 to 64 letters, digits, "_" or "-"`);
  return owner;
}

/** The intake subject of one owner's tasks. */
export function tasksSubmitSubject(owner: string): string {
  return `${Subjects.tasksSubmit}.${checkOwner(owner)}`;
}

/** The intake subject of one owner's improvement runs. */
export function improveSubmitSubject(owner: string): string {
  return `${Subjects.improveSubmit}.${checkOwner(owner)}`;
}

/**
 * The owner token of a message that arrived on `<base>.<owner>`; {@link DEFAULT_OWNER} for one on
 * `<base>` itself (a message queued before subjects carried owners).
 * @returns null when the subject is neither (or its token is not a valid owner)
 */
export function ownerOfSubject(subject: string, base: string): string | null {
  if (subject === base) return DEFAULT_OWNER;
  if (!subject.startsWith(`${base}.`)) return null;
  const token = subject.slice(base.length + 1);
  return OWNER_PATTERN.test(token) ? token : null;
}

/** Subject of one task's progress events: `loopsmith.events.<owner>.<taskId>`. */
export function eventsSubject(owner: string, taskId: string): string {
  return `${SUBJECT_PREFIX}.events.${checkOwner(owner)}.${taskId}`;
}

/**
 * Subject of the notices of rejected intake messages of one owner: a message on the submit
 * subject that is not JSON or fails its schema gets a `RejectNotice` here (core NATS, not stored).
 */
export function rejectsSubject(intake: "tasks" | "improve", owner: string): string {
  return `${SUBJECT_PREFIX}.rejects.${intake}.${checkOwner(owner)}`;
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
