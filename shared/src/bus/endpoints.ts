/**
 * The endpoint catalogue: every request/reply endpoint of every service, with its subject
 * and the zod schemas of both directions, and the subject rule of a client's (owned)
 * endpoint. The transport that serves and calls them is `bus.ts`.
 */
import { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";
import * as C from "../contracts/index.js";
import { DEFAULT_OWNER, OWNER_PATTERN, Subjects } from "./subjects.js";

/** One endpoint: its name in `$SRV` INFO, its subject, and both schemas. */
export interface EndpointDef<Req extends z.ZodType = z.ZodType, Res extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly subject: string;
  readonly request: Req;
  readonly response: Res;
  /**
   * A client's endpoint: called on `<subject>.<owner>` (the caller's owner token, see
   * `DEFAULT_OWNER` in `subjects.ts`), served on `<subject>.*`, and its handler gets the owner
   * from the subject. The NATS permission matrix lets each client publish only with its own
   * token, so the handler can answer with that owner's tasks alone.
   */
  readonly owned?: boolean;
}

function endpoint<Req extends z.ZodType, Res extends z.ZodType>(
  name: string,
  subject: string,
  request: Req,
  response: Res,
  owned = false,
): EndpointDef<Req, Res> {
  return { name, subject, request, response, owned };
}

/** A client's endpoint ({@link EndpointDef.owned}). */
function ownedEndpoint<Req extends z.ZodType, Res extends z.ZodType>(
  name: string,
  subject: string,
  request: Req,
  response: Res,
): EndpointDef<Req, Res> {
  return endpoint(name, subject, request, response, true);
}

/**
 * The subject a caller sends a request to: the endpoint's, with the owner token for an owned one.
 * @throws LoopsmithError `bad_request` when an owned endpoint's owner is not a valid token
 */
export function requestSubject(def: EndpointDef, owner: string = DEFAULT_OWNER): string {
  if (!def.owned) return def.subject;
  if (!OWNER_PATTERN.test(owner))
    throw new LoopsmithError(
      "bad_request",
      `the owner "${owner}" is not valid: use 1 to 64 letters, digits, "_" or "-"`,
    );
  return `${def.subject}.${owner}`;
}

/** The subject a service subscribes on for an endpoint (`<subject>.*` for an owned one). */
export function servedSubject(def: EndpointDef): string {
  return def.owned ? `${def.subject}.*` : def.subject;
}

/** A replica's subject token: its instance id (1 to 64 letters, digits, `_` or `-`). */
export const REPLICA_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The subject of an endpoint on one replica only: `<subject>.<replicaId>` (agent mode's
 * `session_call` and `session_close`, sent to the executor that holds the session, whose id
 * `SessionOpened.executorId` names).
 * @throws LoopsmithError `bad_request` when `replicaId` is not a valid token ({@link REPLICA_PATTERN})
 */
export function replicaSubject(def: EndpointDef, replicaId: string): string {
  if (!REPLICA_PATTERN.test(replicaId))
    throw new LoopsmithError(
      "bad_request",
      `the replica id "${replicaId}" is not valid: use 1 to 64 letters, digits, "_" or "-"`,
    );
  return `${def.subject}.${replicaId}`;
}

/**
 * An endpoint as served and called on one replica: the same name and schemas, its subject
 * {@link replicaSubject}. Serve it with `handle(onReplica(def, myId), …)` (only that replica
 * subscribes, so its queue group holds one member); call it with
 * `call(nc, onReplica(def, executorId), req)`. A replica that is gone answers nothing: the
 * call fails `unavailable` (no responders).
 * @throws LoopsmithError `bad_request` as {@link replicaSubject}; and for an owned endpoint
 */
export function onReplica<E extends EndpointDef>(def: E, replicaId: string): E {
  if (def.owned)
    throw new LoopsmithError("bad_request", `${def.subject} is an owned endpoint: it has no replica subject`);
  return { ...def, subject: replicaSubject(def, replicaId) };
}

/** Every endpoint of every service. */
export const Endpoints = {
  architect: {
    /** A task's checkpoint; null when the task is unknown or belongs to another owner. */
    status: ownedEndpoint(
      "status",
      Subjects.architect.status,
      C.StatusRequest,
      z.object({ state: z.unknown().nullable() }),
    ),
    /** Cancels a task of the caller's; false when it is final, unknown or another owner's. */
    cancel: ownedEndpoint("cancel", Subjects.architect.cancel, C.CancelRequest, z.object({ cancelled: z.boolean() })),
    /** A person's answer to a dependency approval request of a task of the caller's (see `contracts/approval.ts`). */
    approve: ownedEndpoint("approve", Subjects.architect.approve, C.ApproveRequest, C.ApproveReply),
    /** One page of a task's events, for its owner (see {@link C.EventsRequest}). */
    events: ownedEndpoint("events", Subjects.architect.events, C.EventsRequest, C.EventsPage),
    /** An improvement run: its state (null when unknown) and the reports of its generations so far. */
    improveStatus: ownedEndpoint(
      "improve_status",
      Subjects.architect.improveStatus,
      z.object({ runId: C.RunId }),
      z.object({ state: z.unknown().nullable(), reports: z.array(C.GenerationReport) }),
    ),
  },
  builder: {
    build: endpoint("build", Subjects.builder.build, C.BuildRequest, C.BuildReply),
    /** Agent mode: the model's next message in a tool loop. */
    turn: endpoint("turn", Subjects.builder.turn, C.AgentTurnRequest, C.AgentTurnReply),
  },
  reviewer: {
    gate: endpoint("gate", Subjects.reviewer.gate, C.GateRequest, C.GateResult),
    review: endpoint("review", Subjects.reviewer.review, C.ReviewRequest, C.ReviewReply),
    /** The security audit's model: OWASP-class findings on a candidate, with the static tools' (`Task.audit`). */
    audit: endpoint("audit", Subjects.reviewer.audit, C.AuditRequest, C.AuditReply),
  },
  executor: {
    run: endpoint("run", Subjects.executor.run, C.ExecutionRequest, C.ExecutionResult),
    /** Agent mode: opens a session container on any replica; the reply names the replica. */
    sessionOpen: endpoint("session_open", Subjects.executor.sessionOpen, C.SessionOpen, C.SessionOpened),
    /**
     * One call in a session, sent to the replica that holds it: `<subject>.<executorId>` (the
     * token is the replica's id, not an owner; each replica serves only its own).
     */
    sessionCall: endpoint("session_call", Subjects.executor.sessionCall, C.SessionCall, C.SessionObservation),
    /** Removes a session's container, on its replica's subject like `sessionCall`. */
    sessionClose: endpoint(
      "session_close",
      Subjects.executor.sessionClose,
      C.SessionClose,
      z.object({ closed: z.boolean() }),
    ),
  },
  memory: {
    recall: endpoint("recall", Subjects.memory.recall, C.RecallRequest, C.Recall),
    rememberFailure: endpoint("remember_failure", Subjects.memory.rememberFailure, C.FailureRecord, C.Remembered),
    attachFix: endpoint("attach_fix", Subjects.memory.attachFix, C.FailureFix, C.Remembered),
    rememberSuccess: endpoint("remember_success", Subjects.memory.rememberSuccess, C.SuccessRecord, C.Remembered),
    recordTask: endpoint("record_task", Subjects.memory.recordTask, C.TaskRecord, C.Remembered),
    history: ownedEndpoint("history", Subjects.memory.history, C.HistoryRequest, C.History),
    failures: ownedEndpoint("failures", Subjects.memory.failures, C.FailuresRequest, C.Failures),
    stats: ownedEndpoint("stats", Subjects.memory.stats, C.StatsRequest, C.MemoryStats),
    run: ownedEndpoint("run", Subjects.memory.run, C.RunRequest, C.RunPart),
  },
} as const;
