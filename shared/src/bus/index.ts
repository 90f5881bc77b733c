/**
 * The bus: subjects and endpoints, the typed request/reply over `$SRV` services, NATS options,
 * errors and permissions, JetStream streams, buckets and object stores (snapshots, checkpoint
 * blobs), and idempotency of handlers.
 * An explicit list: what is not named here is internal to the package.
 */
export { natsConnectOptions, natsIdentity, natsRefusal, natsServers } from "./nats-options.js";
export {
  NATS_ROLES,
  checkClientNames,
  clientPasswordVariable,
  clientPermission,
  inboxPrefixOf,
  natsPermissions,
  passwordVariable,
  renderNatsServerConfig,
} from "./nats-permissions.js";
export type { NatsPermission, NatsRole, NatsServerConfigOptions } from "./nats-permissions.js";
export { CLUSTER_SETTLE_MS, clusterNotReady, retryWhileClusterSettles, setupBus } from "./bus-setup.js";
export type { SetupBusOptions } from "./bus-setup.js";
export { metaMembership, settleMembership } from "./meta-group.js";
export type { MembershipOutcome, MetaMembership, MetaNodeView } from "./meta-group.js";
export {
  BEATS_PREFIX,
  DEFAULT_OWNER,
  OWNER_PATTERN,
  SUBJECT_PREFIX,
  ServiceNames,
  Streams,
  Subjects,
  checkOwner,
  eventsSubject,
  improveSubmitSubject,
  ownerOfSubject,
  ownerOfTask,
  rejectsSubject,
  tasksSubmitSubject,
} from "./subjects.js";
export type { ServiceName } from "./subjects.js";
export { Endpoints, REPLICA_PATTERN, onReplica, replicaSubject, requestSubject, servedSubject } from "./endpoints.js";
export type { EndpointDef } from "./endpoints.js";
export {
  HEARTBEAT_EVERY_MS,
  HEARTBEAT_HEADER,
  REPLY_HEADER,
  answer,
  call,
  handle,
  pingService,
  startService,
} from "./bus.js";
export { isTransientNatsError, permissionDenied } from "./nats-errors.js";
export type {
  CallOptions,
  Handler,
  HandlerContext,
  Registration,
  ReplyLink,
  ServiceOptions,
  ServicePing,
} from "./bus.js";
export { CHECKPOINT_BLOBS_BUCKET, openCheckpointBlobs } from "./streams.js";
export {
  EVENTS_MAX_AGE_MS,
  TASK_ACK_WAIT_MS,
  TASK_DUPLICATE_WINDOW_MS,
  TASK_MAX_DELIVER,
  differingSettings,
  ensureReplicas,
  ensureStreams,
  ensureTaskIntake,
  followEvents,
  lastEventSeq,
  openBucket,
  openTaskStates,
  publishEvent,
  rejectIntakeMessage,
  submitTask,
} from "./streams.js";
export type { IntakeMessage, StreamOptions, Submitted } from "./streams.js";
export {
  IMPROVE_MAX_DELIVER,
  ensureImproveIntake,
  ensureImproveStreams,
  openImproveStates,
  submitImprove,
} from "./improve-streams.js";
export { createIdempotencyCache } from "./idempotency.js";
export type { IdempotencyCache, IdempotencyOptions } from "./idempotency.js";
export {
  MAX_SNAPSHOT_BYTES,
  REPOS_BUCKET,
  SNAPSHOT_TTL_MS,
  extractTar,
  getSnapshot,
  materializeSnapshot,
  openSnapshots,
  snapshotBucket,
  putSnapshot,
} from "./snapshot.js";
export type { ExtractedTree } from "./snapshot.js";
