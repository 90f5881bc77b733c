/**
 * Reading tar archives (POSIX ustar/pax, what `git archive` and the Docker engine's archive
 * endpoint write) through `tar-stream`: one loop for every caller, with byte caps and member
 * paths made safe. Writing archives stays with `tar-stream`'s `pack()` at the callers.
 */
import { posix } from "node:path";
import { extract, type Header as TarHeader } from "tar-stream";
import { LoopsmithError } from "../runtime/errors.js";

/** One member of an archive, as {@link readTar} hands it over. */
export interface TarEntry {
  /** The member's path, made safe by {@link safeTarPath}: relative, normalised, `/`-separated. */
  path: string;
  /** The member's type as the tar header names it: `file`, `directory`, `symlink`, `link`, … */
  type: NonNullable<TarHeader["type"]>;
  /** Permission bits from the header (for example `0o755`); `0o644` when the header has none. */
  mode: number;
  /** The member's bytes: a regular file's body; empty for directories and links. */
  content: Buffer;
  /** A symbolic or hard link's target, as written in the archive (not made safe). */
  linkname?: string;
}

/** Limits and filters of {@link readTar}. */
export interface ReadTarOptions {
  /** The most bytes one member's body may hold; a larger one throws. @defaultValue unlimited */
  maxEntryBytes?: number;
  /** The most bytes all selected members' bodies may hold together; more throws. @defaultValue unlimited */
  maxTotalBytes?: number;
  /**
   * Which members to hand over, seen before their body is read (an unselected body is skipped,
   * not buffered, and counts against no cap). @defaultValue every member
   */
  select?: (member: { path: string; type: TarEntry["type"] }) => boolean;
}

/**
 * A member path made safe: `./` prefixes and trailing `/` dropped and the path normalised;
 * undefined for one that would leave the extraction root (absolute, `..`, a `..` segment) or
 * holds a NUL byte, so a caller never writes outside the directory it extracts into
 * ("zip slip"). Pure.
 */
export function safeTarPath(name: string): string | undefined {
  if (name.includes("\0")) return undefined;
  const p = posix.normalize(name.replace(/^(\.\/+)+/, "")).replace(/\/+$/, "");
  if (!p || p === "." || p.startsWith("/") || p === ".." || p.startsWith("../")) return undefined;
  if (p.split("/").includes("..")) return undefined;
  return p;
}

/**
 * Reads a tar archive member by member and calls `onEntry` with each one, in archive order,
 * waiting for it before reading on (so a caller can write each file as it comes without holding
 * the archive's contents). Members whose path is unsafe ({@link safeTarPath}) are skipped.
 * @param input - the whole archive, or a stream of it (a Docker `getArchive` stream; it is destroyed when reading stops early)
 * @throws LoopsmithError `bad_request` when a member is larger than `maxEntryBytes`, the selected
 *   members pass `maxTotalBytes` (the message names the cap, in bytes), or the bytes are not a tar archive
 * @throws whatever `onEntry` throws; reading stops there
 */
export async function forEachTarEntry(
  input: Uint8Array | NodeJS.ReadableStream,
  onEntry: (entry: TarEntry) => void | Promise<void>,
  opts: ReadTarOptions = {},
): Promise<void> {
  const maxEntry = opts.maxEntryBytes ?? Infinity;
  const maxTotal = opts.maxTotalBytes ?? Infinity;
  const ex = extract();
  const source =
    input instanceof Uint8Array
      ? undefined
      : (input as NodeJS.ReadableStream & { destroy?: () => void; readableEnded?: boolean });
  const whole = input instanceof Uint8Array ? Buffer.from(input.buffer, input.byteOffset, input.byteLength) : undefined;
  let sourceError: Error | undefined;
  const onSourceError = (err: Error): void => {
    sourceError = err;
    ex.destroy(err);
  };
  if (source) {
    source.on("error", onSourceError);
    source.pipe(ex);
  } else {
    ex.end(whole);
  }
  let total = 0;
  let inCaller = false;
  try {
    for await (const member of ex) {
      const h = member.header;
      const path = safeTarPath(h.name);
      const type = h.type ?? "file";
      if (path === undefined || (opts.select && !opts.select({ path, type }))) {
        member.resume();
        continue;
      }
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of member) {
        bytes += (chunk as Buffer).byteLength;
        if (bytes > maxEntry)
          throw new LoopsmithError("bad_request", `the tar member ${path} holds more than ${maxEntry} bytes`);
        if (total + bytes > maxTotal)
          throw new LoopsmithError("bad_request", `the tar archive's members hold more than ${maxTotal} bytes`);
        chunks.push(chunk as Buffer);
      }
      total += bytes;
      inCaller = true;
      await onEntry({
        path,
        type,
        mode: h.mode ?? 0o644,
        content: Buffer.concat(chunks),
        ...(h.linkname ? { linkname: h.linkname } : {}),
      });
      inCaller = false;
    }
  } catch (err) {
    if (inCaller || err instanceof LoopsmithError || (sourceError && err === sourceError)) throw err;
    throw new LoopsmithError("bad_request", `not a readable tar archive: ${(err as Error).message}`, { cause: err });
  } finally {
    if (!ex.destroyed) ex.destroy();
    if (source) {
      source.unpipe?.(ex);
      if (source.readableEnded === false) source.destroy?.();
    }
  }
}

/**
 * The members of a tar archive, in archive order; see {@link forEachTarEntry} for the paths,
 * the caps and what is thrown. Holds every selected body in memory: cap it.
 */
export async function readTar(
  input: Uint8Array | NodeJS.ReadableStream,
  opts: ReadTarOptions = {},
): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  await forEachTarEntry(input, (e) => void entries.push(e), opts);
  return entries;
}
