/**
 * The workspace as a tar archive, the form in which a run's files reach the sandbox: the
 * supervisor extracts it at `/` as the sandbox user (bootstrap.ts), so every entry is
 * under `workspace/` or is the result file's directory.
 */
import { pack } from "tar-stream";
import type { FileChange } from "@loopsmith/shared/contracts";

/** An extra archive member placed before the workspace, absolute path inside the container. */
export interface ExtraEntry {
  /** Absolute path, e.g. `/tmp/.loopsmith-ca/ca.pem`. */
  path: string;
  content: Buffer;
  /** @defaultValue 0o644 */
  mode?: number;
}

/**
 * Packs `files` under `workspace/`, plus the empty directory `resultDir` (absolute, mode
 * 0700) where the test runner writes its JUnit file, and `extra` members (absolute paths
 * outside the workspace, such as the run's tripwire tests). Paths must already be checked
 * (`checkFiles`); long paths are written with pax headers.
 * @returns the archive's bytes (ustar/pax)
 */
export async function workspaceArchive(
  files: readonly FileChange[],
  resultDir: string,
  extra: readonly ExtraEntry[] = [],
): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const chunk of tar) chunks.push(chunk as Buffer);
  })();
  const mtime = new Date();
  tar.entry({ name: `${resultDir.replace(/^\/+/, "")}/`, type: "directory", mode: 0o700, mtime });
  for (const e of extra) tar.entry({ name: e.path.replace(/^\/+/, ""), mode: e.mode ?? 0o644, mtime }, e.content);
  for (const f of files) tar.entry({ name: `workspace/${f.path}`, mode: 0o644, mtime }, Buffer.from(f.content, "utf8"));
  tar.finalize();
  await done;
  return Buffer.concat(chunks);
}
