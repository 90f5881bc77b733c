/**
 * The trees of an improvement run. A generation's candidate is its parent tree plus the
 * change its repo-mode task made (the result's unified patch, applied with jsdiff:
 * `candidateFiles` in `../tree.ts`). An accepted candidate becomes the next parent: a new
 * snapshot tar in the object store (`candidateSnapshot` in `../tree.ts`), named by its tree
 * id. The client maps tree ids to the git commits it creates. Here: the diff stat a report shows.
 */
import { parsePatch } from "diff";

/** The diff stat of a unified patch: files, added and removed lines. */
export function diffStat(patch: string): { files: number; insertions: number; deletions: number } {
  let insertions = 0;
  let deletions = 0;
  const parsed = parsePatch(patch);
  for (const p of parsed) {
    for (const h of p.hunks) {
      for (const line of h.lines) {
        if (line.startsWith("+")) insertions += 1;
        else if (line.startsWith("-")) deletions += 1;
      }
    }
  }
  return {
    files: parsed.filter((p) => p.hunks.length || p.oldFileName !== p.newFileName).length,
    insertions,
    deletions,
  };
}
