/**
 * Project instructions from the base tree: `AGENTS.md` at the
 * repository root, else `CONVENTIONS.md`, bounded to {@link MAX_INSTRUCTIONS_BYTES}. Only
 * the root is looked at (no `.loopsmith/AGENTS.md`, no nested files): the convention names
 * the root, and one file keeps what every prompt carries predictable.
 */
import { lstatSync, readFileSync, realpathSync } from "node:fs";
import { join, sep } from "node:path";
import {
  INSTRUCTIONS_FILES,
  MAX_INSTRUCTIONS_BYTES,
  boundInstructions,
  type ProjectInstructions,
} from "@loopsmith/shared/contracts";

/**
 * Reads one root file of the tree. A symbolic link is followed only to a regular file inside
 * the tree (repositories often link `AGENTS.md` to `CLAUDE.md`); one that leaves the tree, a
 * directory or a missing file gives undefined. At most `maxBytes` + 4 bytes are decoded, so
 * a huge file costs no more than the bound (its size comes from `stat`).
 */
function readRootFile(root: string, name: string, maxBytes: number): { text: string; size: number } | undefined {
  const at = join(root, name);
  let real: string;
  try {
    real = lstatSync(at).isSymbolicLink() ? realpathSync(at) : at;
    const top = realpathSync(root);
    if (real !== at && !real.startsWith(top + sep)) return undefined;
    const st = lstatSync(real);
    if (!st.isFile()) return undefined;
    const raw = readFileSync(real);
    return { text: raw.subarray(0, Math.min(raw.length, maxBytes + 4)).toString("utf8"), size: raw.length };
  } catch {
    return undefined;
  }
}

/**
 * The project instructions of the tree at `root`: the first of {@link INSTRUCTIONS_FILES}
 * (`AGENTS.md`, then `CONVENTIONS.md`) that is a readable file with something other than
 * white space in it (an empty `AGENTS.md` falls through to `CONVENTIONS.md`, as Codex skips
 * empty files), cut to `maxBytes` at a line end (`boundInstructions`); undefined when there
 * is none. Never throws.
 * @param maxBytes - the bound in bytes @defaultValue {@link MAX_INSTRUCTIONS_BYTES} (32 KiB)
 */
export function readInstructions(
  root: string,
  maxBytes: number = MAX_INSTRUCTIONS_BYTES,
): ProjectInstructions | undefined {
  for (const name of INSTRUCTIONS_FILES) {
    const file = readRootFile(root, name, maxBytes);
    if (!file || !file.text.trim()) continue;
    const bounded = boundInstructions(name, file.text, maxBytes);
    // The text decoded may be the head of the file: the size and the cut are the whole file's.
    return { ...bounded, bytes: file.size, truncated: bounded.truncated || file.size > maxBytes };
  }
  return undefined;
}
