import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  checkGithubAccess,
  discoverGithubToken,
  ghHostsFile,
  ghHostsToken,
  githubClient,
  openPullRequest,
  parseGithubRepo,
  rateLimitReset,
  sameRepo,
} from "./client.js";

/** What the fake GitHub saw. */
interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/** `ok`: GitHub as usual; `unauthorized`: 401 to everything; `exists`: POST /pulls says one is already open. */
let mode: "ok" | "unauthorized" | "exists" | "missing" | "ratelimit" = "ok";
/** The `x-ratelimit-reset` the `ratelimit` mode sends (Unix seconds). */
const RESET = 1_900_000_000;
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
  if (mode === "ratelimit") {
    res.writeHead(403, {
      "content-type": "application/json; charset=utf-8",
      "x-ratelimit-limit": "60",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String(RESET),
    });
    res.end(JSON.stringify({ message: "API rate limit exceeded for 127.0.0.1.", documentation_url: docs }));
    return;
  }
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
  // No gh configuration of the machine's user leaks in.
  vi.stubEnv("GH_CONFIG_DIR", mkdtempSync(join(tmpdir(), "loopsmith-gh-none-")));
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

describe("the token: GITHUB_TOKEN, GH_TOKEN, then the gh CLI's hosts.yml", () => {
  const hosts = (text: string): string => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-gh-"));
    writeFileSync(join(dir, "hosts.yml"), text);
    return dir;
  };

  it("finds hosts.yml in GH_CONFIG_DIR, else XDG_CONFIG_HOME/gh, else ~/.config/gh", () => {
    expect(ghHostsFile({ GH_CONFIG_DIR: "/c", XDG_CONFIG_HOME: "/x", HOME: "/h" })).toBe("/c/hosts.yml");
    expect(ghHostsFile({ XDG_CONFIG_HOME: "/x", HOME: "/h" })).toBe("/x/gh/hosts.yml");
    expect(ghHostsFile({ HOME: "/h" })).toBe("/h/.config/gh/hosts.yml");
  });

  it("reads github.com's oauth_token, or the active user's, and nothing for another host or the keyring", () => {
    expect(ghHostsToken("github.com:\n    oauth_token: gho_plain\n    user: octo\n    git_protocol: https\n")).toBe(
      "gho_plain",
    );
    expect(
      ghHostsToken(
        "github.com:\n  users:\n    octo:\n      oauth_token: gho_octo\n    other:\n      oauth_token: gho_other\n  user: octo\n",
      ),
    ).toBe("gho_octo");
    // gh's default since 2.24 keeps the token in the keyring: hosts.yml names only the user.
    expect(ghHostsToken("github.com:\n  users:\n    octo:\n  user: octo\n  git_protocol: ssh\n")).toBeUndefined();
    expect(ghHostsToken("ghe.example.com:\n  oauth_token: gho_enterprise\n")).toBeUndefined();
    expect(ghHostsToken("")).toBeUndefined();
  });

  it("GITHUB_TOKEN wins, then GH_TOKEN, then hosts.yml; a malformed file counts as none", () => {
    const dir = hosts("github.com:\n  oauth_token: gho_file\n  user: octo\n");
    expect(discoverGithubToken({ GH_CONFIG_DIR: dir })).toEqual({ token: "gho_file", source: join(dir, "hosts.yml") });
    expect(discoverGithubToken({ GH_CONFIG_DIR: dir, GH_TOKEN: "gh" })).toEqual({ token: "gh", source: "GH_TOKEN" });
    expect(discoverGithubToken({ GH_CONFIG_DIR: dir, GH_TOKEN: "gh", GITHUB_TOKEN: "env" })).toEqual({
      token: "env",
      source: "GITHUB_TOKEN",
    });
    expect(discoverGithubToken({ GH_CONFIG_DIR: hosts("github.com: [unclosed\n") })).toBeUndefined();
    expect(discoverGithubToken({ GH_CONFIG_DIR: join(dir, "absent") })).toBeUndefined();
  });

  it("asks gh auth token (the keyring) when hosts.yml holds none; a logged-out or absent gh counts as none", () => {
    // A stand-in gh on PATH: prints a token for `auth token --hostname github.com`, as gh does.
    const bin = (script: string): string => {
      const dir = mkdtempSync(join(tmpdir(), "loopsmith-gh-bin-"));
      writeFileSync(join(dir, "gh"), `#!/bin/sh\n${script}\n`, { mode: 0o755 });
      return dir;
    };
    const keyring = bin('[ "$1 $2 $3 $4" = "auth token --hostname github.com" ] && echo gho_keyring && exit 0; exit 2');
    const none = hosts("github.com:\n  users:\n    octo:\n  user: octo\n");
    expect(discoverGithubToken({ GH_CONFIG_DIR: none, PATH: keyring })).toEqual({
      token: "gho_keyring",
      source: "gh auth token",
    });
    // hosts.yml's token comes first, and gh is not asked.
    const file = hosts("github.com:\n  oauth_token: gho_file\n");
    expect(discoverGithubToken({ GH_CONFIG_DIR: file, PATH: keyring })?.source).toBe(join(file, "hosts.yml"));
    const loggedOut = bin("echo 'no oauth token found for github.com' >&2; exit 1");
    expect(discoverGithubToken({ GH_CONFIG_DIR: none, PATH: loggedOut })).toBeUndefined();
    expect(
      discoverGithubToken({ GH_CONFIG_DIR: none, PATH: mkdtempSync(join(tmpdir(), "loopsmith-no-gh-")) }),
    ).toBeUndefined();
  });

  it("the client sends the gh token when the environment has none", async () => {
    vi.stubEnv("GH_CONFIG_DIR", hosts("github.com:\n  oauth_token: gho_file\n"));
    await checkGithubAccess(githubClient({ baseUrl }), target);
    expect(seen.map((s) => s.authorization)).toEqual(["token gho_file"]);
  });

  it("an anonymous client sends no token", async () => {
    await checkGithubAccess(githubClient({ baseUrl, anonymous: true }), target);
    expect(seen.map((s) => s.authorization)).toEqual([undefined]);
  });
});

describe("the rate limit", () => {
  it("a 403 with x-ratelimit-remaining 0 is unavailable (retryable), naming the reset time in UTC", async () => {
    mode = "ratelimit";
    const err = await checkGithubAccess(githubClient({ token: "t", baseUrl }), target).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "unavailable",
      retryable: true,
      message: expect.stringMatching(
        /^GitHub's API rate limit is exhausted \(403\).*it resets at 2030-03-17T17:46:40Z/,
      ),
      details: { resetAt: new Date(RESET * 1000).toISOString() },
    });
    expect(seen).toHaveLength(1);
  });

  it("reads x-ratelimit-reset, else retry-after; a 403 that is no rate limit is not one", () => {
    const e = (status: number, headers: Record<string, string>, message = "Forbidden") => ({
      status,
      message,
      response: { headers },
    });
    const now = new Date("2026-01-01T00:00:00Z");
    expect(rateLimitReset(e(403, { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767225900" }), now)).toEqual(
      new Date("2026-01-01T00:05:00Z"),
    );
    expect(rateLimitReset(e(403, { "retry-after": "60" }, "You have exceeded a secondary rate limit"), now)).toEqual(
      new Date("2026-01-01T00:01:00Z"),
    );
    expect(rateLimitReset(e(429, {}), now)).toBeNull();
    expect(rateLimitReset(e(403, { "x-ratelimit-remaining": "4999" }), now)).toBeUndefined();
    expect(rateLimitReset(e(404, { "x-ratelimit-remaining": "0" }), now)).toBeUndefined();
  });
});

describe("sameRepo and draft pull requests", () => {
  it("compares owner and name without case", () => {
    expect(sameRepo({ owner: "Acme", repo: "Slug" }, target)).toBe(true);
    expect(sameRepo({ owner: "acme", repo: "slug2" }, target)).toBe(false);
    expect(sameRepo({ owner: "acme2", repo: "slug" }, target)).toBe(false);
  });

  it("asks for a draft when told to", async () => {
    await openPullRequest(githubClient({ token: "t", baseUrl }), target, { ...pr, draft: true });
    expect(seen[0]?.body).toEqual({ ...pr, draft: true });
  });
});
