/**
 * The tree the improver tests work on: `app.py` (whose `score` passes cases below 2, and
 * below 10 once fixed) and a `bench.py` stand-in, put in the object store as a snapshot.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { putSnapshot } from "@loopsmith/shared/bus";
import { snapshotName } from "@loopsmith/shared/contracts";

/** `app.py` as the run starts: passes cases below 2. */
export const ORIGINAL = "def score(case):\n    return case < 2\n";
/** `app.py` as a good generation writes it: passes cases below 10. */
export const FIXED = "def score(case):\n    return case < 10\n";

/**
 * Puts the tree (app.py = {@link ORIGINAL}, bench.py) in the object store under the name of
 * commit `base` (40 hex digits).
 * @returns the snapshot's name.
 */
export async function putImproveTree(nc: NatsConnection, base: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "improve-tree-"));
  writeFileSync(join(dir, "app.py"), ORIGINAL);
  writeFileSync(join(dir, "bench.py"), "# prints the cases\n");
  await putSnapshot(nc, snapshotName(base), execFileSync("tar", ["-cf", "-", "-C", dir, "app.py", "bench.py"]));
  return snapshotName(base);
}
