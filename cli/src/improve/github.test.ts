import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { GenerationReport, LoopsmithError } from "@loopsmith/shared";
import { PR_BODY_MAX, checkGithubAccess, githubClient, openPullRequest, parseGithubRepo, prBody } from "./github.js";

/** What the fake GitHub saw. */
interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/** `ok`: GitHub as usual; `unauthorized`: 401 to everything; `exists`: POST /pulls says one is already open. */
let mode: "ok" | "unauthorized" | "exists" | "missing" = "ok";
const seen: Seen[] = [];
let server: Server;
let baseUrl = "";

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

async function fakeGithub(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = "";
  for await (const chunk of req) raw += String(chunk);
  const path = req.url ?? "";
  seen.push({
    method: req.method ?? "",
    path,
    authorization: req.headers.authorization,
    body: raw ? JSON.parse(raw) : undefined,
  });
  const docs = "https://docs.github.com/rest";
  if (mode === "unauthorized")
    return answer(res, 401, { message: "Bad credentials", documentation_url: docs, status: "401" });
  if (mode === "missing") return answer(res, 404, { message: "Not Found", documentation_url: docs, status: "404" });
  const repo = /^\/repos\/([^/]+)\/([^/?]+)(\/pulls)?(\?.*)?$/.exec(path);
  if (!repo) return answer(res, 404, { message: "Not Found", documentation_url: docs });
  const [, owner, name, pulls, query] = repo;
  if (req.method === "GET" && !pulls)
    return answer(res, 200, { id: 1, name, full_name: `${owner}/${name}`, default_branch: "main", private: false });
  if (req.method === "POST" && pulls) {
    if (mode === "exists") {
      return answer(res, 422, {
        message: "Validation Failed",
        errors: [
          {
            resource: "PullRequest",
            code: "custom",
            message: `A pull request already exists for ${owner}:loopsmith/improve/r-gen-1.`,
          },
        ],
        documentation_url: docs,
        status: "422",
      });
    }
    return answer(res, 201, { number: 42, html_url: `https://github.com/${owner}/${name}/pull/42`, state: "open" });
  }
  if (req.method === "GET" && pulls) {
    const head = new URLSearchParams(query?.slice(1)).get("head");
    const open =
      head === `${owner}:loopsmith/improve/r-gen-1`
        ? [
            {
              number: 7,
              html_url: `https://github.com/${owner}/${name}/pull/7`,
              head: { ref: "loopsmith/improve/r-gen-1" },
            },
          ]
        : [];
    return answer(res, 200, open);
  }
  return answer(res, 404, { message: "Not Found", documentation_url: docs });
}

beforeAll(async () => {
  server = createServer((req, res) => void fakeGithub(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  mode = "ok";
  seen.length = 0;
  vi.stubEnv("GITHUB_TOKEN", "");
  vi.stubEnv("GH_TOKEN", "");
  vi.stubEnv("GITHUB_API_URL", "");
});
afterEach(() => {
  vi.unstubAllEnvs();
});

const target = { owner: "acme", repo: "slug" };
const pr = { head: "loopsmith/improve/r-gen-1", base: "main", title: "loopsmith: normalize accents", body: "evidence" };

describe("parseGithubRepo", () => {
  it("reads owner/name, HTTPS and SSH remotes", () => {
    for (const spec of [
      "acme/slug",
      "https://github.com/acme/slug",
      "https://github.com/acme/slug.git",
      "git@github.com:acme/slug.git",
      "ssh://git@github.com/acme/slug.git",
      " acme/slug \n",
    ]) {
      expect(parseGithubRepo(spec), spec).toEqual(target);
    }
    expect(parseGithubRepo("octo-org/my.repo_2")).toEqual({ owner: "octo-org", repo: "my.repo_2" });
  });

  it("refuses other hosts, paths and names with bad_request", () => {
    for (const spec of [
      "",
      "slug",
      "acme/slug/extra",
      "https://gitlab.com/acme/slug",
      "git@gitlab.com:acme/slug.git",
      "-acme/slug",
      "acme/..",
      "acme/sl ug",
    ]) {
      expect(() => parseGithubRepo(spec), spec).toThrow(
        expect.objectContaining({
          name: "LoopsmithError",
          code: "bad_request",
          message: expect.stringContaining("give owner/name"),
        }),
      );
    }
  });
});

describe("githubClient", () => {
  it("needs a token: config_invalid naming GITHUB_TOKEN when there is none", () => {
    expect(() => githubClient({ baseUrl })).toThrow(
      expect.objectContaining({
        code: "config_invalid",
        message: expect.stringMatching(/^--pr github needs a token: set GITHUB_TOKEN/),
      }),
    );
  });

  it("takes the token and the API URL from the environment, GITHUB_TOKEN before GH_TOKEN", async () => {
    vi.stubEnv("GH_TOKEN", "from-gh");
    vi.stubEnv("GITHUB_API_URL", baseUrl);
    await checkGithubAccess(githubClient({}), target);
    vi.stubEnv("GITHUB_TOKEN", "from-github");
    await checkGithubAccess(githubClient({}), target);
    await checkGithubAccess(githubClient({ token: "explicit" }), target);
    expect(seen.map((s) => s.authorization)).toEqual(["token from-gh", "token from-github", "token explicit"]);
  });
});

describe("checkGithubAccess", () => {
  it("reads the repository with the token and returns its default branch", async () => {
    await expect(checkGithubAccess(githubClient({ token: "t0ken", baseUrl }), target)).resolves.toEqual({
      defaultBranch: "main",
    });
    expect(seen).toEqual([{ method: "GET", path: "/repos/acme/slug", authorization: "token t0ken", body: undefined }]);
  });

  it("turns GitHub's 401 into config_invalid, and 404 into not_found", async () => {
    mode = "unauthorized";
    const refused = await checkGithubAccess(githubClient({ token: "bad", baseUrl }), target).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LoopsmithError);
    expect(refused).toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(/^GitHub refused the token \(401\).*GITHUB_TOKEN.*acme\/slug/),
    });
    expect(seen).toHaveLength(1); // not retried
    mode = "missing";
    await expect(checkGithubAccess(githubClient({ token: "t", baseUrl }), target)).rejects.toMatchObject({
      code: "not_found",
      message: expect.stringContaining("acme/slug"),
    });
  });

  it("says unavailable when nothing answers", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const dead = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await expect(checkGithubAccess(githubClient({ token: "t", baseUrl: dead }), target)).rejects.toMatchObject({
      code: "unavailable",
    });
  });
});

describe("openPullRequest", () => {
  it("posts head, base, title and body with the token and returns the number and URL", async () => {
    const opened = await openPullRequest(githubClient({ token: "t0ken", baseUrl }), target, pr);
    expect(opened).toEqual({ number: 42, url: "https://github.com/acme/slug/pull/42" });
    expect(seen).toEqual([{ method: "POST", path: "/repos/acme/slug/pulls", authorization: "token t0ken", body: pr }]);
  });

  it("returns the open pull request for the branch when GitHub says one already exists (422)", async () => {
    mode = "exists";
    const client = githubClient({ token: "t0ken", baseUrl });
    expect(await openPullRequest(client, target, pr)).toEqual({
      number: 7,
      url: "https://github.com/acme/slug/pull/7",
    });
    expect(seen.map((s) => [s.method, s.path.split("?")[0]])).toEqual([
      ["POST", "/repos/acme/slug/pulls"],
      ["GET", "/repos/acme/slug/pulls"],
    ]);
    const query = new URLSearchParams(seen[1]?.path.split("?")[1]);
    expect(query.get("head")).toBe("acme:loopsmith/improve/r-gen-1");
    expect(query.get("state")).toBe("open");
    // A 422 with no open pull request for the branch is GitHub's refusal, reported as such.
    await expect(openPullRequest(client, target, { ...pr, head: "other" })).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringContaining("(422)"),
    });
  });

  it("reports a refused token as config_invalid", async () => {
    mode = "unauthorized";
    await expect(openPullRequest(githubClient({ token: "bad", baseUrl }), target, pr)).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringContaining("(401)"),
    });
  });
});

describe("prBody", () => {
  const side = (passes: number) => ({ passes, runs: 2, scores: [] });
  const report = (generation: number, n: number, caseName = (i: number) => `case-${i}`): GenerationReport =>
    GenerationReport.parse({
      v: 1,
      runId: "r",
      generation,
      parent: "0123456789abcdef0123456789abcdef01234567",
      hypothesis: { title: "Normalize accents | before slugifying", rationale: "8 titles have accents" },
      change: {
        summary: "normalize",
        patch: "",
        changed: ["textkit/slug.py"],
        deleted: ["old.py"],
        stat: { files: 2, insertions: 5, deletions: 1 },
      },
      bench: {
        command: "python3 bench/run.py",
        format: "json",
        repeats: 2,
        cases: Array.from({ length: n }, (_, i) => ({
          case: caseName(i),
          parent: side(i % 2 ? 0 : 2),
          candidate: side(2),
        })),
      },
      statistic: {
        test: "mcnemar_exact",
        cases: n,
        fixed: Math.floor(n / 2),
        broken: 0,
        pValue: 2 * 0.5 ** 8,
        alpha: 0.05,
        effect: 0.5,
      },
      decision: { verdict: "accepted", reason: "accepted", message: "8 fixed, none broken" },
      usage: {
        calls: 4,
        inputTokens: 12000,
        outputTokens: 3456,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: 0.05678,
        latencyMs: 1,
      },
      phasesMs: {},
      startedAt: "2025-01-01T00:00:00Z",
      finishedAt: "2025-01-01T00:01:00Z",
    });

  it("gives the hypothesis, decision, statistic, diff stat, the changed cases only, and the cost", () => {
    const body = prBody(report(6, 16), "run-1");
    expect(body).toContain("## loopsmith improvement run `run-1`");
    expect(body).toContain("**Hypothesis:** Normalize accents \\| before slugifying");
    expect(body).toContain("**Decision:** accepted (`accepted`): 8 fixed, none broken");
    expect(body).toContain(
      "exact McNemar test on 16 paired cases: 8 fixed, 0 broken, p = 0.00781 (alpha 0.05), effect +50.0 percentage points",
    );
    expect(body).toContain("2 files changed, +5 −1");
    expect(body).toContain("`textkit/slug.py`, `old.py` (deleted)");
    expect(body).toContain("16/32 passes on the parent, 32/32 on the candidate");
    const rows = body.split("\n").filter((l) => /^\| case-/.test(l));
    expect(rows).toEqual(Array.from({ length: 8 }, (_, k) => `| case-${2 * k + 1} | 0/2 | 2/2 |`));
    expect(body).toContain("8 of 16 cases unchanged.");
    expect(body).toContain("4 model calls, 15,456 tokens (12,000 in, 3,456 out), $0.0568");
    expect(body).not.toMatch(/scripted/i);
  });

  it("says so first when the run was scripted", () => {
    const body = prBody([report(1, 4), report(2, 4)], "run-1", { scripted: true });
    expect(body.split("\n")[2]).toMatch(/^> \*\*Scripted run:\*\* .*no model was called/);
    expect(body.match(/^### Generation \d+: accepted$/gm)).toEqual([
      "### Generation 1: accepted",
      "### Generation 2: accepted",
    ]);
  });

  it("stays under GitHub's limit by cutting the case list, with a note", () => {
    const body = prBody(
      report(3, 8000, (i) => `tests/very/long/path/to/a/benchmark/case/number/${i}/${"x".repeat(60)}`),
      "run-1",
    );
    expect(body.length).toBeLessThanOrEqual(PR_BODY_MAX);
    expect(body.length).toBeGreaterThan(PR_BODY_MAX - 500);
    const rows = body.split("\n").filter((l) => l.startsWith("| tests/")).length;
    expect(rows).toBeGreaterThan(100);
    expect(rows).toBeLessThan(4000);
    expect(body).toContain(`…and ${(4000 - rows).toLocaleString("en-US")} more changed cases, left out`);
    expect(body).toContain("**Cost:**");
  });
});
