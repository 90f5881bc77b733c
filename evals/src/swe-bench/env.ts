/**
 * The environment spec of SWE-bench instances: (repo, version) → how to install the project
 * and the command that runs its tests, in the shape of the official harness's per-repo specs
 * (`MAP_REPO_VERSION_TO_SPECS` in swebench/harness/constants/python.py): a JSON object
 * `{ "<owner>/<name>": { "<version>": { python?, pre_install?, install, test_cmd, log_parser? } } }`.
 * A version key `"*"` is the repository's default for versions it does not name.
 * See docs/SWE-BENCH.md for the file format.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { SandboxImage } from "@loopsmith/shared/contracts";

/** How a test run's output is read into per-test statuses (see parsers.ts). */
export const LogParser = z.enum(["pytest", "django", "sympy"]);
export type LogParser = z.infer<typeof LogParser>;

/** One (repo, version)'s environment. */
export const EnvSpec = z
  .object({
    /** The Python version the official image uses; informational (the sandbox image has one Python). */
    python: z.string().optional(),
    /** Commands run before `install`, each a shell line. */
    pre_install: z.array(z.string()).optional(),
    /** The install step, a shell line; empty: nothing to install (the sandbox image's packages suffice). */
    install: z.string().optional(),
    /** The test command, a shell line; the test files are appended as arguments when grading. */
    test_cmd: z.string().min(1).optional(),
    /** The log parser; default: `django` for django/django, `sympy` for sympy/sympy, else `pytest`. */
    log_parser: LogParser.optional(),
    /**
     * The image the instance runs in (a template as `--images` takes: `{instance_id}`,
     * `{repo}`, `{version}`); `--images` and an instance's own `image_name` win over it.
     */
    image: z.string().min(1).optional(),
    /** Shell lines before the test command in an instance image. @defaultValue {@link OFFICIAL_PROLOGUE} */
    prologue: z.string().min(1).optional(),
    /** Where the repository is in an instance image. @defaultValue "/testbed" */
    workdir: z.string().min(2).optional(),
  })
  .passthrough();
export type EnvSpec = z.infer<typeof EnvSpec>;

/** An environment file: repo → version (or `"*"`) → spec. */
export const EnvFile = z.record(z.string(), z.record(z.string(), EnvSpec));
export type EnvFile = z.infer<typeof EnvFile>;

/** A resolved environment: every field a run needs. */
export interface ResolvedEnv {
  python?: string;
  preInstall: string[];
  install: string;
  testCmd: string;
  logParser: LogParser;
  /** The environment file's image template, prologue and workdir, when it gives them. */
  image?: string;
  prologue?: string;
  workdir?: string;
}

/** How the official evaluation script enters an instance image's environment. */
export const OFFICIAL_PROLOGUE = "source /opt/miniconda3/bin/activate && conda activate testbed";
/** Where the repository is in an official instance image. */
export const OFFICIAL_WORKDIR = "/testbed";

/**
 * The official image of an instance as the harness names it: `swebench/sweb.eval.x86_64.` and
 * the instance id with `__` replaced by `_1776_`, lower case, tag `latest`
 * (swebench/harness/test_spec/test_spec.py, `instance_image_key`).
 */
export function officialImage(instanceId: string): string {
  return `swebench/sweb.eval.x86_64.${instanceId.replaceAll("__", "_1776_")}:latest`.toLowerCase();
}

/**
 * The image an instance runs in, or undefined for loopsmith's own sandbox image: the
 * instance's `image_name` (SWE-bench Pro and Multilingual give one), else `--images`
 * (`official`: {@link officialImage}; anything else a template with `{instance_id}`, `{repo}`
 * and `{version}`), else the environment file's `image` (a template too). Commands run after
 * the environment's `prologue` (default {@link OFFICIAL_PROLOGUE}) from its `workdir` (default
 * {@link OFFICIAL_WORKDIR}), as the official evaluation script runs them.
 * @throws LoopsmithError `bad_request` when the name is not an image reference
 */
export function instanceImage(
  inst: { instance_id: string; repo: string; version: string; image_name?: string | undefined },
  env: Pick<ResolvedEnv, "image" | "prologue" | "workdir">,
  images?: string,
): SandboxImage | undefined {
  const fill = (t: string) =>
    t
      .replaceAll("{instance_id}", inst.instance_id)
      .replaceAll("{repo}", inst.repo)
      .replaceAll("{version}", inst.version);
  const name =
    inst.image_name ??
    (images === "official"
      ? officialImage(inst.instance_id)
      : images
        ? fill(images)
        : env.image
          ? fill(env.image)
          : undefined);
  if (!name) return undefined;
  const parsed = SandboxImage.safeParse({
    name,
    workdir: env.workdir ?? OFFICIAL_WORKDIR,
    prologue: env.prologue ?? OFFICIAL_PROLOGUE,
  });
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `the image of ${inst.instance_id} is not valid (${name}): ${parsed.error.issues.map((i) => `${i.path.join(".") || "name"}: ${i.message}`).join("; ")}`,
    );
  return parsed.data;
}

/** The official harness's pytest command (`TEST_PYTEST`). */
const PYTEST = "pytest --no-header -rA --tb=no -p no:cacheprovider";

/**
 * The official test commands of the SWE-bench Lite and Verified repositories, one per
 * repository (the official specs give every version of a repository the same command, with
 * the exceptions noted in docs/SWE-BENCH.md). No install step: the official images build
 * conda environments with network access, which a user supplies here through `--env`.
 */
export const BUILTIN_ENV: EnvFile = {
  "astropy/astropy": { "*": { test_cmd: "pytest -rA -vv -o console_output_style=classic --tb=no" } },
  "django/django": {
    "*": { test_cmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", log_parser: "django" },
  },
  "pallets/flask": { "*": { test_cmd: PYTEST } },
  "matplotlib/matplotlib": { "*": { test_cmd: PYTEST } },
  "pylint-dev/pylint": { "*": { test_cmd: PYTEST } },
  "pytest-dev/pytest": { "*": { test_cmd: PYTEST } },
  "psf/requests": { "*": { test_cmd: PYTEST } },
  "scikit-learn/scikit-learn": { "*": { test_cmd: PYTEST } },
  "mwaskom/seaborn": { "*": { test_cmd: "pytest --no-header -rA" } },
  "sphinx-doc/sphinx": { "*": { test_cmd: "tox --current-env -epy39 -v --" } },
  "sympy/sympy": {
    "*": {
      test_cmd: "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
      log_parser: "sympy",
    },
  },
  "pydata/xarray": { "*": { test_cmd: PYTEST } },
};

/**
 * Reads an environment override file.
 * @throws LoopsmithError `bad_request` when it cannot be read, is not JSON, or is not of the
 *   shape (the message names the field)
 */
export function loadEnvFile(path: string): EnvFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new LoopsmithError("bad_request", `cannot read the environment file ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const parsed = EnvFile.safeParse(raw);
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `the environment file ${path}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  return parsed.data;
}

/**
 * `override` over `base`, merged per repository and version, field by field (an override's
 * field replaces the base's; fields it leaves out keep the base's).
 */
export function mergeEnv(base: EnvFile, override: EnvFile): EnvFile {
  const out: EnvFile = {};
  for (const [repo, versions] of Object.entries(base)) out[repo] = { ...versions };
  for (const [repo, versions] of Object.entries(override)) {
    const into = (out[repo] ??= {});
    for (const [version, spec] of Object.entries(versions)) into[version] = { ...into[version], ...spec };
  }
  return out;
}

/** The default parser of a repository. */
function defaultParser(repo: string): LogParser {
  return repo === "django/django" ? "django" : repo === "sympy/sympy" ? "sympy" : "pytest";
}

/**
 * The environment of (repo, version): the version's spec over the repository's `"*"` spec.
 * @throws LoopsmithError `bad_request` when neither gives a `test_cmd` (the message says
 *   which file shape adds one)
 */
export function resolveEnv(env: EnvFile, repo: string, version: string): ResolvedEnv {
  const versions = env[repo] ?? {};
  const spec: EnvSpec = { ...versions["*"], ...versions[version] };
  if (!spec.test_cmd)
    throw new LoopsmithError(
      "bad_request",
      `no test_cmd for ${repo} version ${version}: add { "${repo}": { "${version}": { "test_cmd": "..." } } } to an --env file (docs/SWE-BENCH.md)`,
    );
  return {
    ...(spec.python ? { python: spec.python } : {}),
    preInstall: spec.pre_install ?? [],
    install: spec.install ?? "",
    testCmd: spec.test_cmd,
    logParser: spec.log_parser ?? defaultParser(repo),
    ...(spec.image ? { image: spec.image } : {}),
    ...(spec.prologue ? { prologue: spec.prologue } : {}),
    ...(spec.workdir ? { workdir: spec.workdir } : {}),
  };
}

/** The setup command of an environment: `pre_install` then `install`, joined by `&&`; `""` when both are empty. */
export function setupCommandOf(env: ResolvedEnv): string {
  return [...env.preInstall, env.install]
    .map((s) => s.trim())
    .filter(Boolean)
    .join(" && ");
}
