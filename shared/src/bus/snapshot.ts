/**
 * Repository snapshots: the tracked files of one commit as a tar (what `git archive` writes),
 * kept in its owner's JetStream object store ({@link snapshotBucket}: `loopsmith-repos` for the
 * default client, `loopsmith-repos-<owner>` for the others) under {@link snapshotName}. The
 * client puts it; the architect and the executor read it and keep an extracted copy on disk,
 * one directory per owner and commit, so no service needs the user's checkout and nothing of
 * `.git` or of the ignored files travels. One store per owner: reading a store needs message
 * reads by sequence, which the permission matrix cannot narrow by subject, and a store shared
 * by clients would let one put a tree under a commit another is about to use.
 */
import { mkdir, mkdtemp, rename, rm, stat, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { nanos } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Objm, StorageType, type ObjectStore } from "@nats-io/obj";
import { LoopsmithError } from "../runtime/errors.js";
import { permissionDenied } from "./nats-errors.js";
import { ensureReplicas, type StreamOptions } from "./streams.js";
import { forEachTarEntry } from "../workspace/tar.js";
import { DEFAULT_OWNER, checkOwner } from "./subjects.js";

/** The object store bucket that holds the default client's snapshots (others: {@link snapshotBucket}). */
export const REPOS_BUCKET = "loopsmith-repos";

/**
 * The object store bucket of one owner's snapshots: {@link REPOS_BUCKET} for the default
 * client, `loopsmith-repos-<owner>` for any other.
 * @throws Error when `owner` is not a valid owner token
 */
export function snapshotBucket(owner: string = DEFAULT_OWNER): string {
  return owner === DEFAULT_OWNER ? REPOS_BUCKET : `${REPOS_BUCKET}-${checkOwner(owner)}`;
}
/** How long a snapshot is kept after it was put, in ms (7 days, like the events). */
export const SNAPSHOT_TTL_MS = 7 * 24 * 3600_000;
/** Largest snapshot accepted, in bytes (512 MiB). */
export const MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024;

/**
 * Opens (creating when missing) one owner's snapshot store.
 * @throws LoopsmithError `permission_denied` when it is missing and this user may not create it
 *   (the message names `loopsmith bus setup --client <owner>`)
 */
export async function openSnapshots(
  nc: NatsConnection,
  owner: string = DEFAULT_OWNER,
  opts: StreamOptions = {},
): Promise<ObjectStore> {
  const objm = new Objm(nc);
  const bucket = snapshotBucket(owner);
  const replicas = opts.replicas ?? 1;
  try {
    const store = await objm.open(bucket);
    // Only setups ask for more than one replica; a client opening its store reads nothing else.
    if (replicas > 1) await ensureReplicas(await jetstreamManager(nc), `OBJ_${bucket}`, replicas);
    return store;
  } catch (openErr) {
    if (openErr instanceof LoopsmithError) throw openErr;
    try {
      return await objm.create(bucket, {
        storage: StorageType.File,
        ttl: nanos(SNAPSHOT_TTL_MS),
        replicas,
        description: `loopsmith repository snapshots of ${owner} (tar of a commit's tracked files)`,
      });
    } catch (err) {
      const refused = permissionDenied(err);
      if (!refused) throw err;
      const setup = owner === DEFAULT_OWNER ? "loopsmith bus setup" : `loopsmith bus setup --client ${owner}`;
      throw new LoopsmithError(
        "permission_denied",
        `the snapshot store ${bucket} is missing, and this NATS user may not create it: run \`${setup}\` with the admin user's credentials (${refused.message})`,
        { cause: err, retryable: false },
      );
    }
  }
}

/**
 * Puts a snapshot unless one of that name is already stored (names are content-addressed by
 * commit, so an existing one is the same tree).
 * @returns true when it was uploaded, false when it was already there
 * @throws LoopsmithError `bad_request` over {@link MAX_SNAPSHOT_BYTES}; `permission_denied` when
 *   this NATS user may not put objects; `unavailable` when the store fails
 */
export async function putSnapshot(
  nc: NatsConnection,
  name: string,
  tar: Uint8Array,
  owner: string = DEFAULT_OWNER,
): Promise<boolean> {
  if (tar.byteLength > MAX_SNAPSHOT_BYTES) {
    throw new LoopsmithError(
      "bad_request",
      `the repository snapshot is ${Math.round(tar.byteLength / 1048576)} MiB, over the ${MAX_SNAPSHOT_BYTES / 1048576} MiB limit`,
    );
  }
  try {
    const os = await openSnapshots(nc, owner);
    const info = await os.info(name);
    if (info && !info.deleted && info.size === tar.byteLength) return false;
    await os.putBlob({ name }, tar);
    return true;
  } catch (err) {
    if (err instanceof LoopsmithError) throw err;
    throw (
      permissionDenied(err) ??
      new LoopsmithError("unavailable", `cannot store the repository snapshot ${name}: ${(err as Error).message}`, {
        cause: err,
      })
    );
  }
}

/**
 * Reads a snapshot's bytes.
 * @throws LoopsmithError `not_found` when the store has no such object (expired or never put);
 *   `unavailable` when the store fails
 */
export async function getSnapshot(
  nc: NatsConnection,
  name: string,
  owner: string = DEFAULT_OWNER,
): Promise<Uint8Array> {
  let data: Uint8Array | null;
  try {
    data = await (await openSnapshots(nc, owner)).getBlob(name);
  } catch (err) {
    if (err instanceof LoopsmithError) throw err;
    throw (
      permissionDenied(err) ??
      new LoopsmithError("unavailable", `cannot read the repository snapshot ${name}: ${(err as Error).message}`, {
        cause: err,
      })
    );
  }
  if (!data)
    throw new LoopsmithError(
      "not_found",
      `the repository snapshot ${name} is not in the ${snapshotBucket(owner)} store (expired after 7 days, or never uploaded): submit the task again from the repository`,
    );
  return data;
}

/** What {@link extractTar} wrote. */
export interface ExtractedTree {
  /** Regular files, workspace-relative, sorted. */
  files: string[];
  /** Symbolic links, workspace-relative (kept as links; readers must not follow them). */
  symlinks: string[];
  /** Bytes of the regular files. */
  bytes: number;
}

/** Whether a (made safe) member path lies inside `.git`, which a snapshot never carries. */
const inGit = (path: string): boolean => path.split("/").includes(".git");

/**
 * Extracts a snapshot into `dir` (which must not exist): regular files with their mode's
 * execute bit, directories, and symbolic links as links. Members outside the tree (absolute,
 * `..`, see `safeTarPath`) or inside `.git` are skipped; other member types (devices,
 * hard links) are skipped. Read by {@link forEachTarEntry}, one file in memory at a time.
 * @throws LoopsmithError `bad_request` when the bytes are not a tar archive
 */
export async function extractTar(tar: Uint8Array, dir: string): Promise<ExtractedTree> {
  const out: ExtractedTree = { files: [], symlinks: [], bytes: 0 };
  await mkdir(dir, { recursive: true });
  const kept = new Set(["directory", "file", "contiguous-file", "symlink"]);
  try {
    await forEachTarEntry(
      tar,
      async (e) => {
        const target = join(dir, e.path);
        if (e.type === "directory") {
          await mkdir(target, { recursive: true });
        } else if (e.type === "symlink") {
          if (!e.linkname) return;
          await mkdir(dirname(target), { recursive: true });
          await symlink(e.linkname, target);
          out.symlinks.push(e.path);
        } else {
          await mkdir(dirname(target), { recursive: true });
          await writeFile(target, e.content, { mode: e.mode & 0o111 ? 0o755 : 0o644 });
          out.files.push(e.path);
          out.bytes += e.content.byteLength;
        }
      },
      { select: (m) => kept.has(m.type) && !inGit(m.path) },
    );
  } catch (err) {
    throw new LoopsmithError(
      "bad_request",
      `the repository snapshot is not a readable tar archive: ${(err as Error).message}`,
      { cause: err },
    );
  }
  out.files.sort();
  out.symlinks.sort();
  return out;
}

const inFlight = new Map<string, Promise<string>>();

/**
 * `owner`'s snapshot extracted under `cacheDir/<owner>/<name without .tar>/`, fetched and
 * extracted once per process, owner and name (concurrent callers share the work; the directory appears atomically, by
 * rename, so a crash never leaves a half tree that looks complete).
 * @returns the directory
 * @throws LoopsmithError as {@link getSnapshot} and {@link extractTar}
 */
export async function materializeSnapshot(
  nc: NatsConnection,
  name: string,
  cacheDir: string,
  owner: string = DEFAULT_OWNER,
): Promise<string> {
  // One folder per owner: a tree extracted from one owner's store never serves another's.
  const dir = join(cacheDir, checkOwner(owner), name.replace(/\.tar$/, ""));
  const existing = inFlight.get(dir);
  if (existing) return existing;
  const work = (async () => {
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    )
      return dir;
    await mkdir(dirname(dir), { recursive: true });
    const tmp = await mkdtemp(join(dirname(dir), ".partial-"));
    try {
      await extractTar(await getSnapshot(nc, name, owner), join(tmp, "tree"));
      await rename(join(tmp, "tree"), dir).catch(async (err: NodeJS.ErrnoException) => {
        // Another process won the race: its tree is the same commit.
        if (err.code !== "ENOTEMPTY" && err.code !== "EEXIST") throw err;
      });
      return dir;
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  })();
  inFlight.set(dir, work);
  try {
    return await work;
  } finally {
    inFlight.delete(dir);
  }
}
