/**
 * The one hand-back of a durable job (a task, a DAG, an improvement run): thrown out of
 * {@link DurableHandler.run} when the job cannot go on now but must not fail (the service is
 * stopping, an executor or the builder is unavailable for the moment). The durable consumer
 * hands the job's message back to the broker (a `nak`), and a later delivery resumes the job
 * from its last checkpoint. A retryable `LoopsmithError` is handed back the same way; wrap one
 * in a `HandBack` (with `cause`) only where code between the failure and the consumer would
 * otherwise take it for the job's own failure.
 */
export class HandBack extends Error {
  override readonly name = "HandBack";
}
