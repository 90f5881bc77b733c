/**
 * Submits an improvement run of a checked repository: its base snapshot to the object store,
 * then the request to the improver's intake. `improve` and `metrics` both submit this way.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { putSnapshot, submitImprove } from "@loopsmith/shared/bus";
import { snapshotName, type ImproveRequestInput } from "@loopsmith/shared/contracts";
import type { CheckedRepo } from "../repo.js";

/**
 * Uploads `snapshot` (the base commit's archive) and submits the run.
 * @param extra - the request's fields other than `v`, `runId`, `repo`, `submittedAt` (language, settings, `self`, `measureOnly`)
 * @returns what the intake answered (`duplicate` when the run id was taken)
 * @throws LoopsmithError when the snapshot or the submit fails
 */
export async function submitRun(
  nc: NatsConnection,
  run: { runId: string; repo: CheckedRepo; snapshot: Buffer; setupCommand?: string; owner: string },
  extra: Omit<ImproveRequestInput, "v" | "runId" | "repo" | "submittedAt">,
): ReturnType<typeof submitImprove> {
  const name = snapshotName(run.repo.baseCommit);
  await putSnapshot(nc, name, run.snapshot, run.owner);
  return submitImprove(
    nc,
    {
      v: 1,
      runId: run.runId,
      repo: {
        baseCommit: run.repo.baseCommit,
        snapshot: name,
        name: run.repo.name,
        ...(run.setupCommand !== undefined ? { setupCommand: run.setupCommand } : {}),
      },
      ...extra,
      submittedAt: new Date().toISOString(),
    },
    run.owner,
  );
}
