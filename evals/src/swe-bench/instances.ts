/**
 * SWE-bench instances: one JSON object a line, in the official dataset's
 * shape (the fields of `SWE-bench/SWE-bench_Verified` and `_Lite` on Hugging Face):
 * `instance_id`, `repo` (`owner/name`), `base_commit`, `problem_statement`, `hints_text`,
 * `patch` (the gold fix, outside the tests), `test_patch` (the tests that check it),
 * `FAIL_TO_PASS`, `PASS_TO_PASS` (test ids: JSON-encoded string lists in the official files,
 * or plain arrays), `version`, `environment_setup_commit`. Other fields (`created_at`, ...)
 * are ignored.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";

/** A list of test ids: a JSON array of strings, or that array JSON-encoded in a string (the official files). */
const TestList = z.union([
  z.array(z.string()),
  z.string().transform((s, ctx) => {
    try {
      return z.array(z.string()).parse(JSON.parse(s));
    } catch {
      ctx.addIssue({ code: "custom", message: "not a JSON-encoded list of strings" });
      return z.NEVER;
    }
  }),
]);

/** One SWE-bench instance, its test lists decoded. */
export const SweInstance = z.object({
  instance_id: z.string().min(1),
  /** `owner/name` on GitHub. */
  repo: z.string().regex(/^[\w.-]+\/[\w.-]+$/, "repo must be owner/name"),
  base_commit: z.string().regex(/^[0-9a-f]{40}$/, "base_commit must be a full commit id (40 hex)"),
  problem_statement: z.string().min(1),
  hints_text: z.string().default(""),
  patch: z.string(),
  test_patch: z.string().min(1),
  FAIL_TO_PASS: TestList,
  PASS_TO_PASS: TestList,
  version: z.union([z.string(), z.number()]).transform(String),
  environment_setup_commit: z.string().optional(),
  /** The instance's own image (SWE-bench Pro and Multilingual give one); it wins over `--images`. */
  image_name: z.string().min(1).optional(),
});
export type SweInstance = z.infer<typeof SweInstance>;

/** One prediction (`predictions.jsonl`), the official harness's input shape. */
export const SwePrediction = z.object({
  instance_id: z.string().min(1),
  model_name_or_path: z.string().default(""),
  /** A unified diff against `base_commit`; empty or null: no change. */
  model_patch: z
    .string()
    .nullable()
    .default("")
    .transform((s) => s ?? ""),
});
export type SwePrediction = z.infer<typeof SwePrediction>;

/** The issues of a zod error in one line. */
function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join(".") || "(line)"}: ${i.message}`).join("; ");
}

/**
 * Parses JSONL text of `schema` records: blank lines are ignored.
 * @throws LoopsmithError `bad_request` naming the file, the 1-based line and what is wrong
 *   (not JSON, a missing or ill-typed field, an id seen on an earlier line)
 */
function parseLines<T extends { instance_id: string }>(text: string, name: string, schema: z.ZodType<T>): T[] {
  const out: T[] = [];
  const seen = new Map<string, number>();
  text.split("\n").forEach((src, i) => {
    if (!src.trim()) return;
    const line = i + 1;
    let raw: unknown;
    try {
      raw = JSON.parse(src);
    } catch (err) {
      throw new LoopsmithError("bad_request", `${name} line ${line}: not JSON: ${(err as Error).message}`);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw new LoopsmithError("bad_request", `${name} line ${line}: ${issues(parsed.error)}`);
    const first = seen.get(parsed.data.instance_id);
    if (first !== undefined)
      throw new LoopsmithError(
        "bad_request",
        `${name} line ${line}: instance_id ${parsed.data.instance_id} is already on line ${first}`,
      );
    seen.set(parsed.data.instance_id, line);
    out.push(parsed.data);
  });
  return out;
}

function read(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new LoopsmithError("bad_request", `cannot read the ${what} ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Reads a SWE-bench instances file (JSONL).
 * @throws LoopsmithError `bad_request` when the file cannot be read, a line is not a valid
 *   instance (the message names the line), or an `instance_id` repeats
 */
export function loadInstances(path: string): SweInstance[] {
  return parseInstances(read(path, "dataset"), path);
}

/** {@link loadInstances} on text already read; `name` is how messages name the file. */
export function parseInstances(text: string, name = "the dataset"): SweInstance[] {
  return parseLines(text, name, SweInstance);
}

/**
 * Reads a predictions file (JSONL, `instance_id`, `model_name_or_path`, `model_patch`), by
 * instance id.
 * @throws LoopsmithError `bad_request` as {@link loadInstances}
 */
export function loadPredictions(path: string): Map<string, SwePrediction> {
  return new Map(parseLines(read(path, "predictions file"), path, SwePrediction).map((p) => [p.instance_id, p]));
}

/**
 * The files a diff touches, from its `diff --git a/<path> b/<path>` headers (the `b/` side),
 * each once, in order. Paths with spaces are read up to the ` b/` that ends the `a/` side.
 */
export function filesOfPatch(patch: string): string[] {
  const out = new Set<string>();
  for (const m of patch.matchAll(/^diff --git a\/(.+?) b\/(.+)$/gm)) out.add(m[2] ?? "");
  return [...out].filter(Boolean);
}

/**
 * Extensions of files a test patch may touch that are no tests to run (fixtures, data,
 * configuration): the official harness leaves such files out of the test command's
 * arguments.
 */
const NON_TEST_EXTS = [".json", ".png", ".csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"];

/**
 * The test command's arguments for an instance, as the official harness derives them: the
 * files `test_patch` touches, less data files ({@link NON_TEST_EXTS}); for django/django,
 * as test labels (`tests/` dropped, `.py` dropped, `/` → `.`), which `runtests.py` takes.
 */
export function testDirectives(inst: Pick<SweInstance, "repo" | "test_patch">): string[] {
  const files = filesOfPatch(inst.test_patch).filter((f) => !NON_TEST_EXTS.some((e) => f.endsWith(e)));
  if (inst.repo !== "django/django") return files;
  return files.map((f) =>
    (f.startsWith("tests/") ? f.slice("tests/".length) : f).replace(/\.py$/, "").replaceAll("/", "."),
  );
}
