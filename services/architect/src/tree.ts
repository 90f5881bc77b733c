/**
 * Trees as the DAG and the improvement runs build them (`dag/tree.ts`, `improve/`): a
 * change (a unified patch and deleted paths) applied to a parent tree's files, and a new
 * snapshot tar from a parent tar with files replaced, added or left out, named by its
 * **tree id**, the sha-256 of the tar (64 hex digits, the shape of a SHA-256 commit id).
 */
import { createHash } from "node:crypto";
import { applyPatch, parsePatch } from "diff";
import { pack } from "tar-stream";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { forEachTarEntry } from "@loopsmith/shared/workspace";
import { type FileChange, type RepoChange } from "@loopsmith/shared/contracts";

/** A patch's path without git's `a/`/`b/` prefix; undefined for `/dev/null`. */
function stripPrefix(name: string | undefined): string | undefined {
  if (!name || name === "/dev/null") return undefined;
  return name.replace(/^[ab]\//, "");
}

/**
 * The candidate's files: each file the patch changes or creates, in full, read from the
 * parent tree and patched; deleted files are listed apart.
 * @param read - the parent tree's file text, or undefined when it has no such file
 * @throws LoopsmithError `internal` when a hunk does not apply to the parent (the patch was
 *   made against another tree)
 */
export function candidateFiles(
  change: Pick<RepoChange, "patch" | "deleted">,
  read: (path: string) => string | undefined,
): { files: FileChange[]; deleted: string[] } {
  const deleted = new Set(change.deleted);
  const files: FileChange[] = [];
  for (const p of parsePatch(change.patch)) {
    const path = stripPrefix(p.newFileName) ?? stripPrefix(p.oldFileName);
    if (!path || deleted.has(path)) continue;
    const before = stripPrefix(p.oldFileName) ? (read(path) ?? "") : "";
    const after = applyPatch(before, p);
    if (after === false)
      throw new LoopsmithError("internal", `the change of ${path} does not apply to the parent tree`);
    files.push({ path, content: after });
  }
  return { files, deleted: [...deleted] };
}

/**
 * A new snapshot: the parent's tar with the candidate's files replaced or added and its
 * deleted files left out. Entries keep the parent's order (new files at the end) and get
 * mtime 0, so the same tree always gives the same bytes and the same id.
 * @returns the tar bytes and the tree id (sha-256 hex of the bytes)
 */
export async function candidateSnapshot(
  parentTar: Uint8Array,
  files: readonly FileChange[],
  deleted: readonly string[],
): Promise<{ tar: Buffer; id: string }> {
  const replace = new Map(files.map((f) => [f.path, f.content]));
  const gone = new Set(deleted);
  const out = pack();
  const chunks: Buffer[] = [];
  out.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    out.on("end", resolve);
    out.on("error", reject);
  });
  const write = (header: Parameters<typeof out.entry>[0], body?: Buffer): Promise<void> =>
    new Promise((resolve, reject) => {
      const done = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (body) out.entry(header, body, done);
      else out.entry(header, done);
    });
  // Pax headers and other member kinds carry nothing a workspace needs.
  const kept = new Set(["file", "directory", "symlink"]);
  await forEachTarEntry(
    parentTar,
    async (entry) => {
      const name = entry.path;
      if (gone.has(name)) return;
      const content = replace.has(name) ? Buffer.from(replace.get(name) as string, "utf8") : entry.content;
      replace.delete(name);
      if (entry.type === "file")
        await write({ name, mode: entry.mode, mtime: new Date(0), size: content.length }, content);
      else if (entry.type === "directory")
        await write({ name, type: "directory", mode: entry.mode, mtime: new Date(0) });
      else await write({ name, type: "symlink", linkname: entry.linkname ?? "", mtime: new Date(0) });
    },
    { select: (member) => kept.has(member.type) },
  );
  for (const [path, content] of replace) {
    const body = Buffer.from(content, "utf8");
    await new Promise<void>((resolve, reject) =>
      out.entry({ name: path, mode: 0o644, mtime: new Date(0), size: body.length }, body, (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  }
  out.finalize();
  await ended;
  const tar = Buffer.concat(chunks);
  return { tar, id: createHash("sha256").update(tar).digest("hex") };
}
