/**
 * Repo mode's workspace: the base tree of a commit (extracted once per commit from the
 * `loopsmith-repos` object store, `shared/src/bus/snapshot.ts`), minus the paths the candidate
 * deletes, overlaid by the candidate's changed files, packed into the tar archive the
 * supervisor extracts (bootstrap.ts) straight from disk: one directory listing and one file
 * at a time, never the whole tree as strings.
 */
import { createHash } from "node:crypto";
import {
  createReadStream,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  type Stats,
} from "node:fs";
import { realpath } from "node:fs/promises";
import { join, posix, sep } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { pack, type Pack } from "tar-stream";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { isDependencyManifest } from "@loopsmith/shared/workspace";
import { materializeSnapshot } from "@loopsmith/shared/bus";
import { type FileChange } from "@loopsmith/shared/contracts";
import type { ExtraEntry } from "./archive.js";

/** True when `path` is a dependency manifest: what a setup layer's key covers (shared rule). */
export const isManifest = isDependencyManifest;

/** Directory (or file) names never taken from the tree, at any depth: git's data and installed packages. */
export const NEVER_FROM_TREE: ReadonlySet<string> = new Set([".git", "node_modules"]);

/** tmpfs pages: a file takes whole 4 KiB pages, however small. */
const PAGE = 4096;
/** Files up to this size are read whole; larger ones are streamed into the archive, bytes. */
const STREAM_ABOVE = 1024 * 1024;

/** What a workspace is made of: the tree, what it loses, what is laid over it. */
export interface TreeOverlay {
  /** The extracted base tree (a directory on the host). */
  treeDir: string;
  /** Tree paths (files, links, or whole directories) left out. */
  deleted: readonly string[];
  /** The candidate's files, full content; they replace tree files of the same path. */
  files: readonly FileChange[];
}

/** Limits of {@link repoArchive}: the sandbox's workspace tmpfs. */
export interface ArchiveLimits {
  /** Most bytes, counted in whole 4 KiB pages as tmpfs charges them. */
  maxBytes: number;
  /** Most entries (files, links and directories): the tmpfs inode bound (`inodesFor`). */
  maxEntries: number;
}

/** A dependency manifest in the workspace: its path and the sha256 (hex) of its content. */
export interface Manifest {
  path: string;
  sha256: string;
}

/** The packed workspace and what went into it. */
export interface RepoArchive {
  /** The tar archive (ustar/pax), ready for `SandboxWork.archive`. */
  archive: Buffer;
  /** Regular files packed (tree and overlay). */
  files: number;
  /** Symbolic links kept (their target stays inside the tree). */
  links: number;
  /** Bytes of the files' content. */
  bytes: number;
  /** Bytes as tmpfs charges them (each file rounded up to 4 KiB pages). */
  pageBytes: number;
  /** Files, links and directories. */
  entries: number;
  /** Links left out because they point outside the tree (or into `.git`). */
  droppedLinks: string[];
  /** Overlay paths left out: under `.git/` or `node_modules/`. */
  droppedFiles: string[];
  /** The workspace's dependency manifests, sorted by path. */
  manifests: Manifest[];
}

const sha256 = (data: Buffer | string): string => createHash("sha256").update(data).digest("hex");

function invalid(message: string, path?: string): LoopsmithError {
  return new LoopsmithError("workspace_invalid", message, { details: path === undefined ? undefined : { path } });
}

/** Every proper ancestor directory of a relative path (`a/b/c` → `a`, `a/b`). */
function ancestors(path: string): string[] {
  const parts = path.split("/");
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** One thing of the tree, in archive order. `under`: an overlay file's path that is a directory here. */
interface Item {
  kind: "dir" | "file" | "link" | "overlaid";
  rel: string;
  abs: string;
  under?: string;
}

/** An item with what was read from disk. */
interface Loaded {
  item: Item;
  info?: Stats;
  /** Whole content (files up to 1 MiB, and manifests); absent: streamed. */
  body?: Buffer;
  target?: string;
  inside?: boolean;
}

/** Items read between two yields to the event loop. */
const YIELD_EVERY = 64;

/** Streams a large file into one entry of `size` bytes. */
function putStream(tar: Pack, header: Parameters<Pack["entry"]>[0], file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const entry = tar.entry(header, (err) => (err ? reject(err) : resolve()));
    const src = createReadStream(file);
    src.on("error", (err) => {
      entry.destroy(err);
      reject(err);
    });
    src.pipe(entry);
  });
}

/** What packing one workspace holds: the tree, the overlay, the archive stream, the tallies. */
interface Packing {
  /** The tree's real path. */
  root: string;
  deleted: ReadonlySet<string>;
  /** Overlay files by path (those under `.git/` or `node_modules/` already dropped). */
  overlay: ReadonlyMap<string, FileChange>;
  /** Every ancestor directory of an overlay file. */
  overlayDirs: ReadonlySet<string>;
  /** Whether the tree file an overlay file replaces is executable, by path. */
  execBits: Map<string, boolean>;
  limits: ArchiveLimits;
  out: RepoArchive;
  manifests: Manifest[];
  tar: Pack;
  /** The callback of every buffered entry: keeps the first error in `entryError`. */
  onEntry: (err?: Error | null) => void;
  entryError: Error | undefined;
  mtime: Date;
}

/** An empty {@link RepoArchive}, counting the root directory's entry. */
function emptyArchive(): RepoArchive {
  return {
    archive: Buffer.alloc(0),
    files: 0,
    links: 0,
    bytes: 0,
    pageBytes: 0,
    entries: 1,
    droppedLinks: [],
    droppedFiles: [],
    manifests: [],
  };
}

/**
 * Counts one entry of `size` bytes (`what`: its path, for the message) against the limits.
 * @throws LoopsmithError `workspace_invalid` when the workspace passes its tmpfs bytes or inodes
 */
function account(p: Packing, size: number, what: string): void {
  const { out, limits } = p;
  out.bytes += size;
  out.pageBytes += Math.max(1, Math.ceil(size / PAGE)) * PAGE;
  out.entries += 1;
  if (out.pageBytes > limits.maxBytes) {
    const mib = (n: number): string => `${Math.round((n / 1048576) * 10) / 10} MiB`;
    throw invalid(
      `the workspace (base tree and changed files) needs more than ${mib(limits.maxBytes)} of tmpfs (at ${what}, ${out.files + out.links} files so far, ${mib(out.pageBytes)} in 4 KiB pages); raise executor.tmpfsMb`,
    );
  }
  if (out.entries > limits.maxEntries) {
    throw invalid(
      `the workspace (base tree and changed files) has more than ${limits.maxEntries} files and directories, the tmpfs inode limit; raise executor.tmpfsMb`,
    );
  }
}

/** True when `rel` or one of its ancestors is deleted. */
function isDeleted(deleted: ReadonlySet<string>, rel: string): boolean {
  return deleted.has(rel) || (deleted.size > 0 && ancestors(rel).some((a) => deleted.has(a)));
}

/** The tree in archive order, one directory listing at a time. */
function* items(p: Packing, abs: string, rel: string, under: string | undefined): Generator<Item> {
  const { overlay } = p;
  const dirents = readdirSync(abs, { withFileTypes: true });
  dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (rel) yield { kind: "dir", rel, abs };
  for (const d of dirents) {
    if (NEVER_FROM_TREE.has(d.name)) continue;
    const childRel = rel ? `${rel}/${d.name}` : d.name;
    const childAbs = join(abs, d.name);
    if (isDeleted(p.deleted, childRel)) continue;
    if (d.isDirectory()) yield* items(p, childAbs, childRel, under ?? (overlay.has(childRel) ? childRel : undefined));
    else if (overlay.has(childRel)) yield { kind: "overlaid", rel: childRel, abs: childAbs };
    else if (d.isSymbolicLink()) yield { kind: "link", rel: childRel, abs: childAbs, ...(under ? { under } : {}) };
    else if (d.isFile()) yield { kind: "file", rel: childRel, abs: childAbs, ...(under ? { under } : {}) };
  }
}

/**
 * Whether a link of the tree stays inside it and out of `.git`: resolved on the host, or
 * lexically when it dangles.
 */
function linkInside(root: string, item: Item, target: string): boolean {
  try {
    const real = realpathSync(item.abs);
    return (real === root || real.startsWith(root + sep)) && !real.slice(root.length).split(sep).includes(".git");
  } catch {
    const lexical = posix.normalize(posix.join(posix.dirname(item.rel), target));
    return (
      !posix.isAbsolute(target) &&
      lexical !== ".." &&
      !lexical.startsWith("../") &&
      !lexical.split("/").includes(".git")
    );
  }
}

/**
 * Reads what an item needs from disk. Synchronous on purpose: thousands of small reads through
 * libuv's thread pool cost ~10× more than the reads themselves (3–7 s against 0.4 s for
 * 10,000 files on a loaded 2-core host); the caller yields to the event loop every
 * {@link YIELD_EVERY} items, so no block lasts more than a few ms.
 */
function load(root: string, item: Item): Loaded {
  if (item.kind === "dir") return { item };
  if (item.kind === "link") {
    const target = readlinkSync(item.abs);
    return { item, target, inside: linkInside(root, item, target) };
  }
  const info = lstatSync(item.abs);
  if (item.kind === "overlaid" || (info.size > STREAM_ABOVE && !isManifest(item.rel))) return { item, info };
  return { item, info, body: readFileSync(item.abs) };
}

/**
 * `rel`, a tree file or link that is packed, may not be an overlay file's ancestor.
 * @throws LoopsmithError `workspace_invalid` when it is, or when the item is under an overlay file
 */
function claim(p: Packing, item: Item, what: string): void {
  if (item.under) throw invalid(`the changed file "${item.under}" is a directory in the base tree`, item.under);
  if (p.overlayDirs.has(item.rel))
    throw invalid(`a changed file is under "${item.rel}", which is a ${what} in the base tree`, item.rel);
}

/** Packs a tree link when it stays inside; records it as dropped otherwise. */
function emitLink(p: Packing, { item, target, inside }: Loaded): void {
  if (!inside || target === undefined) {
    p.out.droppedLinks.push(item.rel);
    return;
  }
  claim(p, item, "link");
  account(p, 0, item.rel);
  const { mtime } = p;
  p.tar.entry({ name: `workspace/${item.rel}`, type: "symlink", linkname: target, mode: 0o777, mtime }, p.onEntry);
  p.out.links += 1;
}

/**
 * Packs one loaded item of the tree: a directory is counted, an overlaid file's execute bit
 * noted, a link or a regular file packed (a large file streamed).
 * @throws LoopsmithError `workspace_invalid` (limits, overlay conflicts); `sandbox_error` when
 *   a file changed while it was read
 */
async function emit(p: Packing, loaded: Loaded): Promise<void> {
  const { item, info, body } = loaded;
  if (item.kind === "dir") return account(p, 0, item.rel);
  if (item.kind === "overlaid") {
    if (info?.isFile()) p.execBits.set(item.rel, (info.mode & 0o111) !== 0);
    return;
  }
  if (item.kind === "link") return emitLink(p, loaded);
  if (!info?.isFile()) return;
  claim(p, item, "file");
  account(p, info.size, item.rel);
  const header = {
    name: `workspace/${item.rel}`,
    mode: info.mode & 0o111 ? 0o755 : 0o644,
    mtime: p.mtime,
    size: info.size,
  };
  if (!body) {
    await putStream(p.tar, header, item.abs);
  } else {
    if (body.length !== info.size)
      throw new LoopsmithError("sandbox_error", `the cached base tree changed while it was read: ${item.rel}`);
    if (isManifest(item.rel)) p.manifests.push({ path: item.rel, sha256: sha256(body) });
    p.tar.entry(header, body, p.onEntry);
  }
  p.out.files += 1;
}

/**
 * Writes every entry in order: `extra`, the result directory, the tree, then the overlay.
 * @throws what {@link emit} and {@link account} throw
 */
async function packEntries(p: Packing, resultDir: string, extra: readonly ExtraEntry[]): Promise<void> {
  const { tar, mtime, onEntry } = p;
  for (const e of extra)
    tar.entry(
      { name: e.path.replace(/^\/+/, ""), mode: e.mode ?? 0o644, mtime, size: e.content.length },
      e.content,
      onEntry,
    );
  tar.entry({ name: `${resultDir.replace(/^\/+/, "")}/`, type: "directory", mode: 0o700, mtime }, onEntry);
  let n = 0;
  for (const item of items(p, p.root, "", undefined)) {
    await emit(p, load(p.root, item));
    if (++n % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  for (const f of p.overlay.values()) {
    const body = Buffer.from(f.content, "utf8");
    account(p, body.length, f.path);
    if (isManifest(f.path)) p.manifests.push({ path: f.path, sha256: sha256(body) });
    tar.entry(
      { name: `workspace/${f.path}`, mode: p.execBits.get(f.path) ? 0o755 : 0o644, mtime, size: body.length },
      body,
      onEntry,
    );
    p.out.files += 1;
  }
}

/** The archive's bytes as they come, and a promise settled when the stream ends or fails. */
function collect(tar: Pack): { chunks: Buffer[]; collected: Promise<void> } {
  const chunks: Buffer[] = [];
  // 'data' events: about half the cost of async iteration over 30,000 small chunks.
  tar.on("data", (chunk: unknown) => void chunks.push(chunk as Buffer));
  const collected = new Promise<void>((resolve, reject) => {
    tar.on("end", resolve);
    tar.on("close", resolve);
    tar.on("error", reject);
  });
  return { chunks, collected };
}

/** Logs the links and overlay files left out of the workspace, when there are any. */
function logDropped(out: RepoArchive, log: Logger | undefined): void {
  if (out.droppedLinks.length)
    log?.info(
      { links: out.droppedLinks.slice(0, 20), count: out.droppedLinks.length },
      "links that point outside the repository were left out of the workspace",
    );
  if (out.droppedFiles.length)
    log?.info(
      { files: out.droppedFiles.slice(0, 20), count: out.droppedFiles.length },
      "changed files under .git/ or node_modules/ were left out of the workspace",
    );
}

/**
 * Packs the workspace of a repo-mode run: the tree's regular files and inside-pointing
 * symbolic links, except `.git` and `node_modules` at any depth, except `deleted` paths and
 * the paths `files` replace; then `files` (the overlay); everything under `workspace/`, plus
 * the empty result directory `resultDir` (mode 0700) and any `extra` entries first. A link is
 * kept when its target, resolved on the host (`realpath`, or lexically when it dangles), stays
 * inside the tree and out of `.git`; others are dropped and logged. An overlay file keeps
 * the execute bit of the tree file it replaces. Overlay paths under `.git/` or `node_modules/`
 * are dropped (dependencies come only from the setup layer).
 * @throws LoopsmithError `workspace_invalid` when the workspace passes `limits` (the message
 *   names the sizes and `executor.tmpfsMb`), when an overlay file sits where the tree has a
 *   directory, under a tree file, or under a tree link
 */
export async function repoArchive(
  src: TreeOverlay,
  opts: { resultDir: string; limits: ArchiveLimits; extra?: readonly ExtraEntry[]; log?: Logger },
): Promise<RepoArchive> {
  const root = await realpath(src.treeDir);
  const out = emptyArchive();
  const overlay = new Map<string, FileChange>();
  for (const f of src.files) {
    if (f.path.split("/").some((seg) => NEVER_FROM_TREE.has(seg))) out.droppedFiles.push(f.path);
    else overlay.set(f.path, f);
  }
  const tar = pack();
  const { chunks, collected } = collect(tar);
  const p: Packing = {
    root,
    deleted: new Set(src.deleted),
    overlay,
    overlayDirs: new Set([...overlay.keys()].flatMap(ancestors)),
    execBits: new Map(),
    limits: opts.limits,
    out,
    manifests: [],
    tar,
    onEntry: (err) => {
      if (err) p.entryError ??= err;
    },
    entryError: undefined,
    mtime: new Date(),
  };
  try {
    await packEntries(p, opts.resultDir, opts.extra ?? []);
    tar.finalize();
    await collected;
    if (p.entryError) throw p.entryError;
  } catch (err) {
    tar.destroy();
    await collected.catch(() => undefined);
    throw err;
  }
  logDropped(out, opts.log);
  out.manifests = p.manifests.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  out.archive = Buffer.concat(chunks);
  return out;
}

/**
 * A base-tree loader for {@link ExecutorDeps.loadBase}: the snapshot from its owner's object
 * store, extracted once per owner and commit under `cacheDir` (`materializeSnapshot`). The
 * cache is never pruned by the executor.
 * @param cacheDir - e.g. `<dataDir>/cache/repos`
 * @returns a function from a snapshot name to the extracted tree's directory; it throws
 *   LoopsmithError `not_found` (snapshot expired or never put) or `unavailable` (store failed)
 */
export function snapshotLoader(
  nc: NatsConnection,
  cacheDir: string,
): (snapshot: string, owner: string) => Promise<string> {
  return (snapshot, owner) => materializeSnapshot(nc, snapshot, cacheDir, owner);
}
