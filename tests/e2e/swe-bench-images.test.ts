/**
 * `loopsmith bench --format swe-bench --images official` on the look-alikes of the official
 * instance images (deploy/build-swebench-lookalike.sh, built by deploy/prepare.sh): Debian
 * bookworm's Python 3.11 in a conda-style `testbed` environment, the repository at /testbed
 * with its whole history, the fix commit included. The gold patches resolve every shipped
 * instance there and empty patches none; the scripted agent resolves an instance, and a turn
 * that goes looking for the future (`git log --all`, `git show <the fix>`, the reflog,
 * `ls -a /testbed`) finds nothing of it, while `python --version` is the image's; a missing
 * image ends its instance `error`, counted apart as the infrastructure's.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const EX = join(REPO, "examples/swe-bench");
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-swe-images-"));
const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };
const ids = jsonLines(readFileSync(join(EX, "instances.jsonl"), "utf8")).map((l) => String(l.instance_id));
const common = [
  "bench",
  "--format",
  "swe-bench",
  "--dataset",
  join(EX, "instances.jsonl"),
  "--repos",
  join(EX, "repos"),
  "--env",
  join(EX, "env.json"),
];
const official = (id: string) => `swebench/sweb.eval.x86_64.${id.replaceAll("__", "_1776_")}:latest`.toLowerCase();

interface SummaryLine {
  kind: string;
  arms: { off: { passed: number; tasks: number; infraErrors: number } };
}

beforeAll(() => {
  // deploy/prepare.sh builds them (deploy/build-swebench-lookalike.sh); without them this fails.
  for (const id of ids) execFileSync("docker", ["image", "inspect", official(id)], { stdio: "ignore" });
});

describe("swe-bench on the instances' own images (--images official)", () => {
  it("resolves every shipped instance with the gold patches in the image's Python, and none with empty patches", async () => {
    const gold = await loopsmith(
      [...common, "--gold", "--images", "official", "--out", join(dataDir, "gold"), "--json"],
      env,
      900_000,
    );
    expect(gold.code, gold.stderr).toBe(0);
    const summary = jsonLines(gold.stdout).find((l) => l.kind === "summary") as unknown as SummaryLine;
    expect(summary.arms.off).toMatchObject({ passed: ids.length, tasks: ids.length });
    for (const id of ids)
      expect(readFileSync(join(dataDir, "gold", "logs", `${id}.log`), "utf8")).toContain("Python 3.11");
    const empty = await loopsmith(
      [...common, "--empty", "--images", "official", "--out", join(dataDir, "empty"), "--json"],
      env,
      900_000,
    );
    const none = jsonLines(empty.stdout).find((l) => l.kind === "summary") as unknown as SummaryLine;
    expect(none.arms.off).toMatchObject({ passed: 0, tasks: ids.length });
  }, 1_800_000);

  it("a missing image ends its instance error, counted as the infrastructure's, naming the image and how to get it", async () => {
    const out = join(dataDir, "missing");
    await loopsmith(
      [
        ...common,
        "--gold",
        "--ids",
        ids[0] as string,
        "--images",
        "loopsmith-test/missing-{instance_id}:1",
        "--out",
        out,
        "--json",
      ],
      env,
      600_000,
    );
    const [line] = jsonLines(readFileSync(join(out, "results.jsonl"), "utf8"));
    expect(line).toMatchObject({ status: "error", errorCode: "sandbox_error" });
    expect(String(line?.error)).toContain(`docker pull loopsmith-test/missing-${ids[0]}:1`);
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as SummaryLine;
    expect(summary.arms.off.infraErrors).toBe(1);
  }, 900_000);

  it("the scripted agent resolves an instance there, and finds nothing of the fix in the image's history", async () => {
    const id = ids[1] as string;
    const fix = execFileSync("docker", ["run", "--rm", official(id), "git", "-C", "/testbed", "rev-parse", "fix"], {
      encoding: "utf8",
    }).trim();
    expect(fix).toMatch(/^[0-9a-f]{40}$/);
    // The shipped transcript, with a first turn that goes looking for the future.
    const script = JSON.parse(readFileSync(join(EX, "scripts", `${id}.json`), "utf8")) as {
      replies: { agent: unknown[] };
    };
    const probe = `git log --all --oneline | head -5; git show ${fix} 2>&1 | head -5; git reflog 2>&1 | head -3; ls -a /testbed; python --version`;
    script.replies.agent.unshift({
      content: "Look at the repository's history first.",
      toolCalls: [{ name: "run", args: { command: probe } }],
    });
    const scripts = join(dataDir, "scripts");
    mkdirSync(scripts, { recursive: true });
    writeFileSync(join(scripts, `${id}.json`), JSON.stringify(script));
    const out = join(dataDir, "agent");
    const run = await loopsmith(
      [
        ...common,
        "--ids",
        id,
        "--images",
        "official",
        "--provider",
        "scripted",
        "--script",
        scripts,
        "--out",
        out,
        "--json",
      ],
      env,
      1_500_000,
    );
    expect(run.code, run.stderr).toBe(0);
    const [result] = jsonLines(readFileSync(join(out, "results.jsonl"), "utf8"));
    expect((result?.swe as { status: string }).status, String(result?.error)).toBe("resolved");
    const steps = jsonLines(readFileSync(join(out, "logs", `${id}.steps.jsonl`), "utf8")).filter((s) => s.tool);
    const seen = String(steps[0]?.observation);
    expect(steps[0]?.tool).toBe("run");
    expect(seen).toContain("Python 3.11");
    expect(seen).toContain("not a git repository");
    expect(seen).not.toContain("the fix of");
    expect(seen).not.toContain(fix.slice(0, 7));
    expect(seen).not.toMatch(/^\.git$/m);
    expect(seen).toMatch(/^more_itertools$/m);
  }, 1_800_000);
});
