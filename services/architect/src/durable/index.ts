/**
 * The durable-consumer module: a pull consumer whose jobs (tasks, improvement runs) are
 * checkpointed and resume after a crash ({@link runDurableConsumer}), and the checkpoint
 * store whose large parts go to the object store so no checkpoint exceeds `max_payload`
 * ({@link checkpointStore}, `blobs.ts`), and the outbox that keeps a bus message the other
 * side cannot take yet ({@link openOutbox}), and the phase machine every such job runs
 * through ({@link runPhases}, {@link DurableRun}). Its public API is what this file names.
 */
export {
  HEARTBEAT_MS,
  RETRY_DELAY_MS,
  runDurableConsumer,
  type DurableConsumer,
  type DurableConsumerOptions,
  type DurableContext,
  type DurableHandler,
} from "./consumer.js";
export {
  CHECKPOINT_HEADROOM_BYTES,
  checkpointStore,
  maxPayloadOf,
  type BlobStore,
  type CheckpointStore,
  type CheckpointStoreOptions,
  type Checkpointed,
  type Revisioned,
} from "./checkpoints.js";
export {
  BLOB_MIN_BYTES,
  BLOB_REF_KEY,
  STUB_MIN_BYTES,
  compact,
  decode,
  encode,
  isBlobRef,
  refsOf,
  stubText,
  type BlobRef,
  type Encoded,
} from "./blobs.js";
export { HandBack } from "./handback.js";
export {
  DurableRun,
  advance,
  runPhases,
  type PhaseMachine,
  type PhaseStep,
  type RunIO,
  type Sequenced,
} from "./machine.js";
export { pipelinedEvents, publishJobEvent, type PipelinedEvents } from "./events.js";
export { openOutbox, type Outbox, type OutboxOptions } from "./outbox.js";
