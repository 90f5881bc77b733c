/**
 * Workspace checks on the host: the files of a request must stay inside the workspace
 * (no absolute paths, no `..`, no file that is also a directory), and a directory read from
 * disk (the CLI's `--dir`) may not smuggle a link that points outside it.
 */
import { lstat, readdir, readFile, realpath, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type FileChange } from "@loopsmith/shared/contracts";

/** Why a file list was refused: the path at fault and one sentence. */
function invalid(message: string, path?: string): LoopsmithError {
  return new LoopsmithError("workspace_invalid", message, { details: path === undefined ? undefined : { path } });
}

/**
 * True when `p` is a safe workspace-relative path: not absolute, no backslash or NUL, no
 * empty, `.` or `..` segment, at most 255 bytes.
 */
export function isSafeRelativePath(p: string): boolean {
  if (p.length === 0 || Buffer.byteLength(p) > 255) return false;
  if (p.startsWith("/") || p.includes("\\") || p.includes("\0")) return false;
  return p.split("/").every((seg) => seg !== "" && seg !== "." && seg !== "..");
}

/**
 * Checks the files of a request before anything runs.
 * @param files - the request's files
 * @param maxBytes - the workspace size limit, in bytes (UTF-8 content summed)
 * @throws LoopsmithError `workspace_invalid` naming the first bad path: absolute or `..`
 *   paths, a path given twice, a path that is both a file and a directory, or files whose
 *   total size passes `maxBytes`.
 */
export function checkFiles(files: readonly FileChange[], maxBytes: number): void {
  const seen = new Set<string>();
  const dirs = new Set<string>();
  let total = 0;
  for (const f of files) {
    if (!isSafeRelativePath(f.path)) throw invalid(`the path "${f.path}" escapes the workspace`, f.path);
    if (seen.has(f.path)) throw invalid(`the path "${f.path}" is given twice`, f.path);
    if (dirs.has(f.path)) throw invalid(`"${f.path}" is both a file and a directory`, f.path);
    const parts = f.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (seen.has(dir)) throw invalid(`"${dir}" is both a file and a directory`, dir);
      dirs.add(dir);
    }
    seen.add(f.path);
    total += Buffer.byteLength(f.content, "utf8");
  }
  if (total > maxBytes) throw invalid(`the files total ${total} bytes, more than the workspace's ${maxBytes}`);
}

/** Options of {@link readWorkspaceDir}. */
export interface ReadDirOptions {
  /** Most files read. @defaultValue 500 (the request's limit) */
  maxFiles?: number;
  /** Most bytes read in total. @defaultValue 64 MiB */
  maxBytes?: number;
  /** Directory names skipped wherever they appear. @defaultValue .git, __pycache__, .pytest_cache, node_modules */
  skip?: readonly string[];
}

const DEFAULT_SKIP = [".git", "__pycache__", ".pytest_cache", ".hypothesis", "node_modules"];

/**
 * Reads a directory into workspace files (for `loopsmith sandbox run --dir`). A symbolic
 * link is followed only when its target stays inside `dir`; anything else is refused.
 * @returns files sorted by path, content as UTF-8
 * @throws LoopsmithError `workspace_invalid` for a link out of `dir`, a file that is not
 *   UTF-8 text, a special file (socket, device, fifo), or too many files or bytes;
 *   `not_found` when `dir` does not exist or is not a directory.
 */
export async function readWorkspaceDir(dir: string, opts: ReadDirOptions = {}): Promise<FileChange[]> {
  const maxFiles = opts.maxFiles ?? 500;
  const maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
  const skip = new Set(opts.skip ?? DEFAULT_SKIP);
  let root: string;
  try {
    root = await realpath(dir);
    if (!(await stat(root)).isDirectory()) throw new Error("not a directory");
  } catch (err) {
    throw new LoopsmithError("not_found", `the directory ${dir} does not exist or is not a directory`, { cause: err });
  }
  const inside = (p: string): boolean => p === root || p.startsWith(root + sep);
  const files: FileChange[] = [];
  let total = 0;
  const walk = async (abs: string, rel: string): Promise<void> => {
    const entries = await readdir(abs);
    entries.sort();
    for (const name of entries) {
      const childAbs = join(abs, name);
      const childRel = rel ? `${rel}/${name}` : name;
      let info = await lstat(childAbs);
      let real = childAbs;
      if (info.isSymbolicLink()) {
        try {
          real = await realpath(childAbs);
        } catch {
          throw invalid(`the link "${childRel}" points to nothing`, childRel);
        }
        if (!inside(real)) throw invalid(`the link "${childRel}" points outside the workspace`, childRel);
        info = await stat(real);
      }
      if (info.isDirectory()) {
        if (skip.has(name)) continue;
        if (real !== childAbs) throw invalid(`the link "${childRel}" points to a directory; copy it instead`, childRel);
        await walk(childAbs, childRel);
        continue;
      }
      if (!info.isFile()) throw invalid(`"${childRel}" is not a regular file`, childRel);
      if (!isSafeRelativePath(childRel))
        throw invalid(`the path "${childRel}" cannot be used in a workspace`, childRel);
      if (files.length >= maxFiles) throw invalid(`the directory has more than ${maxFiles} files`);
      total += info.size;
      if (total > maxBytes) throw invalid(`the directory holds more than ${maxBytes} bytes`);
      const bytes = await readFile(real);
      const content = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
      let text: string;
      try {
        text = content.decode(bytes);
      } catch {
        throw invalid(`"${childRel}" is not UTF-8 text`, childRel);
      }
      files.push({ path: relative(root, join(root, childRel)).split(sep).join("/"), content: text });
    }
  };
  await walk(root, "");
  return files;
}
