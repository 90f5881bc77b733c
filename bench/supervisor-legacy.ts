/**
 * The Python supervisor as it was before it started lean (a JSON spec, subprocess, threads),
 * read from the project's history rather than kept as a copy: `PYTHON_BOOTSTRAP` of
 * `services/executor/src/bootstrap.ts` at {@link LEGACY_REV}, the last commit that had it.
 * Used only by bench/supervisor.ts to measure the two side by side; not by the executor.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The last commit whose executor ran the old Python supervisor. */
export const LEGACY_REV = "b90fad7722df72ff4781509865e9be2b9ab284c8";

const START = "export const PYTHON_BOOTSTRAP = String.raw`\n";

/**
 * The old supervisor's program text (as `String.raw` held it: it has no `${…}`).
 * @param rev - the commit to read it from
 * @throws Error when git cannot show the file at `rev` (a shallow clone, say) or it holds no such constant
 */
export function legacyPythonBootstrap(rev: string = LEGACY_REV): string {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const source = execFileSync("git", ["-C", root, "show", `${rev}:services/executor/src/bootstrap.ts`], {
    encoding: "utf8",
    maxBuffer: 16 << 20,
  });
  const start = source.indexOf(START);
  const end = start < 0 ? -1 : source.indexOf("\n`;", start + START.length);
  if (end < 0) throw new Error(`no PYTHON_BOOTSTRAP in services/executor/src/bootstrap.ts at ${rev}`);
  return source.slice(start + START.length, end + 1);
}
