/** Helpers of the repo-mode tests: snapshots built in memory, fresh commit ids. */
import { randomBytes } from "node:crypto";
import { pack } from "tar-stream";

/** A tar built in memory from `{name: content}`; a content `->target` makes a symbolic link. */
export async function snapshotTar(entries: Record<string, string>): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of tar) chunks.push(c as Buffer);
  })();
  for (const [name, content] of Object.entries(entries)) {
    if (content.startsWith("->")) tar.entry({ name, type: "symlink", linkname: content.slice(2) });
    else tar.entry({ name, mode: 0o644 }, Buffer.from(content));
  }
  tar.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** A fresh commit id (snapshot names are content-addressed by commit: a new one per test file run). */
export const newCommit = (): string => randomBytes(20).toString("hex");
