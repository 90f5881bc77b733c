/**
 * `loopsmith improve` end to end on its failure paths: one run of six scripted generations on
 * tests/fixtures/improve-repo through NATS, the five services and the Docker sandbox, each of
 * the first five failing in its own way — a hypothesis reply that is not one (`error`), edits
 * that do not apply (`implement_failed`), edits that leave the tree as it was (`no_change`), a
 * change that breaks a check test (`check_failed`), a change that prints into the benchmark's
 * output (`bench_unparsed`) — and the sixth the real fix, accepted. For each failure: the
 * reason, a message that names what failed, its report on disk, the run going on, and nothing
 * of it on the accepted chain.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { cliEnv, git, gitEnv } from "../fixtures/git-repo.js";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const env = cliEnv("loopsmith-improve-failures-e2e-");
/** True when `ancestor` is an ancestor of (or equal to) `of`. */
function isAncestor(dir: string, ancestor: string, of: string): boolean {
  try {
    execFileSync("git", ["-C", dir, "merge-base", "--is-ancestor", ancestor, of], { env: gitEnv, stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function fixtureRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-improve-failures-repo-"));
  cpSync(join(REPO, "tests", "fixtures", "improve-repo"), dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
  return dir;
}

/** A hypothesis reply touching textkit/slug.py. */
function hypothesis(title: string, rationale: string): Record<string, unknown> {
  return { title, rationale, expected: "see the title", files: ["textkit/slug.py"] };
}

/** A builder reply: these search/replace edits of textkit/slug.py. */
function build(summary: string, edits: Array<{ search: string; replace: string }>): Record<string, unknown> {
  return { summary, edits: edits.map((e) => ({ path: "textkit/slug.py", ...e })), notes: "" };
}

const WORDS = '    words = re.findall(r"[a-z0-9]+", title.lower())\n';

/**
 * The scripted replies, one task entry per generation (the improve role is the hypothesis,
 * build the change; every generation shares the plan).
 */
const script = {
  v: 1,
  kind: "loopsmith-script",
  description: "improve-failures e2e: five generations that fail in five ways, then the real fix.",
  replies: {
    plan: [
      {
        summary: "Change textkit/slug.py as the hypothesis says.",
        acceptanceCriteria: ["python3 -m pytest -q passes"],
        steps: ["Edit textkit/slug.py"],
        files: ["textkit/slug.py"],
      },
    ],
  },
  tasks: {
    // Not a hypothesis, on the first ask and on the re-ask: PLAN throws, the generation is `error`.
    "gen-1": { improve: ["I would rather not say.", "Still no hypothesis here."] },
    "gen-2": {
      improve: [hypothesis("Strip accents with a translation table", "The edit's search text is not in the file.")],
      build: [build("Strip accents", [{ search: "    return title.lower()\n", replace: "    return title\n" }])],
    },
    "gen-3": {
      improve: [hypothesis("Tidy the word pattern", "The edit writes the line as it already is.")],
      build: [build("Tidy the word pattern", [{ search: WORDS, replace: WORDS }])],
    },
    "gen-4": {
      improve: [hypothesis("Keep dashes as the title writes them", "Breaks the runs-of-separators test.")],
      build: [
        build("Keep dashes", [{ search: WORDS, replace: '    words = re.findall(r"[a-z0-9-]+", title.lower())\n' }]),
      ],
    },
    "gen-5": {
      improve: [hypothesis("Log each slug as JSON", "Debug output on stdout, where the benchmark prints its cases.")],
      build: [
        build("Log each slug", [
          { search: "import re\n", replace: "import json\nimport re\n" },
          {
            search: '    return "-".join(words)\n',
            replace:
              '    slug = "-".join(words)\n    print(json.dumps({"title": title, "slug": slug}))\n    return slug\n',
          },
        ]),
      ],
    },
    "gen-6": {
      improve: [hypothesis("Transliterate accented letters", "NFKD keeps the base letter of an accented one.")],
      build: [
        build("Transliterate accented letters", [
          { search: "import re\n", replace: "import re\nimport unicodedata\n" },
          {
            search: WORDS,
            replace:
              '    plain = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")\n    words = re.findall(r"[a-z0-9]+", plain.lower())\n',
          },
        ]),
      ],
    },
  },
};

describe("loopsmith improve: every way a generation fails (scripted, real sandbox)", () => {
  const repo = fixtureRepo();
  const base = git(repo, "rev-parse", "HEAD");
  const runId = `failures-${Date.now().toString(36)}`;
  const out = mkdtempSync(join(tmpdir(), "loopsmith-improve-failures-out-"));
  const scriptFile = join(out, "script.json");
  writeFileSync(scriptFile, JSON.stringify(script, null, 2));

  it("rejects each failing generation with its reason, an actionable message and a report, and goes on to accept the fix", async () => {
    const run = await loopsmith(
      [
        "improve",
        "--repo",
        repo,
        "--generations",
        "6",
        "--repeats",
        "1",
        "--calibration-runs",
        "1",
        "--max-iterations",
        "1",
        "--run-id",
        runId,
        "--out",
        out,
        "--json",
        "--check",
        "python3 -m pytest -q",
        "--bench",
        "python3 bench/run.py",
        "--setup-cmd",
        "",
        "--provider",
        "scripted",
        "--script",
        scriptFile,
      ],
      env,
      600_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);

    // Every generation wrote its report, and each parses as a GenerationReport.
    const files = readdirSync(join(out, "reports")).sort();
    expect(files).toEqual(["gen-1.json", "gen-2.json", "gen-3.json", "gen-4.json", "gen-5.json", "gen-6.json"]);
    const reports = files.map((f) => GenerationReport.parse(JSON.parse(readFileSync(join(out, "reports", f), "utf8"))));
    expect(reports.map((r) => [r.generation, r.decision.verdict, r.decision.reason])).toEqual([
      [1, "rejected", "error"],
      [2, "rejected", "implement_failed"],
      [3, "rejected", "no_change"],
      [4, "rejected", "check_failed"],
      [5, "rejected", "bench_unparsed"],
      [6, "accepted", "accepted"],
    ]);
    const [error, implement, noChange, check, unparsed, fix] = reports as [
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
    ];
    // Every generation started from the base: no rejected one became a parent.
    for (const r of [error, implement, noChange, check, unparsed, fix]) expect(r.parent).toBe(base);

    // error: the hypothesis could not be read; the message says so with its code.
    expect(error.hypothesis).toBeUndefined();
    expect(error.decision.message).toMatch(/^llm_bad_reply: asking for the hypothesis \(role improve\): /);
    expect(error.decision.message).toContain("no JSON");

    // implement_failed: no change; the message says the edit did not apply, to which file, and why.
    expect(implement.change).toBeUndefined();
    expect(implement.decision.message).toMatch(/^the task ended failed \(max_iterations\) without a change: /);
    expect(implement.decision.message).toMatch(/the last: edit_failed: Edit 1 \(textkit\/slug\.py\), not_found: /);

    // no_change: the task passed without changing anything, and the message says so.
    expect(noChange.change).toBeUndefined();
    expect(noChange.decision.message).toBe("the task changed nothing: passed after 1 iteration");

    // check_failed: the message names the check and the test that failed on the candidate.
    expect(check.change?.changed).toEqual(["textkit/slug.py"]);
    expect(check.bench).toBeUndefined();
    expect(check.decision.message).toContain("python3 -m pytest -q");
    expect(check.decision.message).toMatch(/the last: failed: failing \S*test_runs_of_separators_become_one_dash$/);

    // bench_unparsed: the candidate's output, not the parent's, and the line that is no case.
    expect(unparsed.check?.candidate).toMatchObject({ total: 4, passed: 4 });
    expect(unparsed.bench).toBeUndefined();
    expect(unparsed.decision.message).toMatch(/^the candidate's benchmark output cannot be read: /);
    expect(unparsed.decision.message).toMatch(/line 1 is a JSON object but not a case \(`case` must be a string\)/);

    // The run went on to the sixth generation and accepted it; only it counts as accepted.
    const summary = jsonLines(run.stdout).find((l) => l.kind === "summary");
    expect(summary).toMatchObject({ stopReason: "completed", generations: 6, accepted: [6] });
    expect(fix.statistic).toMatchObject({ fixed: 20, broken: 0 });

    // Branches: the failed changes stay on their own branches, off the accepted chain; main untouched.
    const runBranch = `loopsmith/improve/${runId}`;
    const gen = (n: number): string => `refs/heads/loopsmith/improve/${runId}-gen-${n}`;
    const refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/").split("\n").sort();
    expect(refs).toEqual([gen(4), gen(5), gen(6), `refs/heads/${runBranch}`, "refs/heads/main"].sort());
    expect(git(repo, "rev-parse", `${runBranch}^`)).toBe(base);
    expect(git(repo, "rev-parse", runBranch)).toBe(git(repo, "rev-parse", gen(6)));
    for (const n of [4, 5]) {
      expect(isAncestor(repo, gen(n), runBranch), `generation ${n} on the run branch`).toBe(false);
      expect(git(repo, "rev-parse", `${gen(n)}^`)).toBe(base);
    }
    expect(git(repo, "rev-list", "--count", `${base}..${runBranch}`)).toBe("1");
    expect(git(repo, "rev-parse", "main")).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
