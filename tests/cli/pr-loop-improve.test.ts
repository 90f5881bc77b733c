/**
 * `improve --pr github --merge-when` after the run (cli/src/improve/pull-requests.ts) against
 * the local fake GitHub API, with two pull requests (generations 1 and 2; the second's branch
 * holds the first's commits): both approved → both merged in generation order; changes
 * requested on the first → a rejection (improve makes no other attempt), closed saying so,
 * and the second closed without being followed, naming the first; the review timeout shared
 * by both. And the command refusing the flags without `--pr github` before anything runs.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { githubClient, type GithubClient } from "../../cli/src/github/client.js";
import { followImprovePulls, mergeImprovePulls } from "../../cli/src/improve/pull-requests.js";
import { startFakeGitHub, type FakeAnswer, type FakeGitHub } from "../fixtures/fake-github.js";
import { loopsmith } from "../fixtures/cli.js";

const target = { owner: "acme", repo: "textkit" };
const sha = (n: number): string => String(n).repeat(40);

interface FakePull {
  state: string;
  merged: boolean;
  head: string;
  reviews: Array<{ id: number; user: { login: string }; state: string; body: string; commit_id: string }>;
}
let pulls: Map<number, FakePull>;
let github: FakeGitHub;
let client: GithubClient;

beforeAll(async () => {
  github = await startFakeGitHub(({ method, route, body }): FakeAnswer => {
    const m = /^\/repos\/acme\/textkit\/(pulls|issues|commits)\/(\w+)(?:\/(\w[\w-]*))?$/.exec(route);
    const pull = m?.[1] !== "commits" ? pulls.get(Number(m?.[2])) : undefined;
    if (m?.[1] === "commits")
      return m[3] === "status"
        ? { status: 200, data: { state: "success", total_count: 1, statuses: [{ context: "ci", state: "success" }] } }
        : { status: 200, data: { total_count: 0, check_runs: [] } };
    if (!pull) return { status: 404, data: { message: "Not Found" } };
    const n = Number(m?.[2]);
    if (method === "GET" && m?.[1] === "pulls" && !m[3])
      return {
        status: 200,
        data: {
          number: n,
          state: pull.state,
          merged: pull.merged,
          draft: false,
          head: { sha: pull.head, ref: `b${n}` },
        },
      };
    if (method === "GET" && m?.[3] === "reviews") return { status: 200, data: pull.reviews };
    if (method === "GET" && m?.[3] === "comments") return { status: 200, data: [] };
    if (method === "PUT" && m?.[3] === "merge") {
      pull.merged = true;
      return { status: 200, data: { sha: sha(9), merged: true, message: "merged" } };
    }
    if (method === "POST" && m?.[1] === "issues" && m[3] === "comments") return { status: 201, data: { id: 1 } };
    if (method === "PATCH" && m?.[1] === "pulls") {
      if (body?.state === "closed") pull.state = "closed";
      return { status: 200, data: { number: n, state: pull.state } };
    }
    return { status: 404, data: { message: "Not Found" } };
  });
  client = githubClient({ token: "good-token", baseUrl: github.url });
});
afterAll(() => github.close());

let clock = 0;
beforeEach(() => {
  github.recorded.length = 0;
  clock = 0;
  pulls = new Map([
    [7, { state: "open", merged: false, head: sha(1), reviews: [] }],
    [8, { state: "open", merged: false, head: sha(2), reviews: [] }],
  ]);
});

const opened = () => ({
  github: { client, target },
  pulls: [
    { generation: 1, number: 7, url: "https://github.com/acme/textkit/pull/7" },
    { generation: 2, number: 8, url: "https://github.com/acme/textkit/pull/8" },
  ],
});
const review = (id: number, state: string, commit: string, body = "") => ({
  id,
  user: { login: "alice" },
  state,
  body,
  commit_id: commit,
});
const posted = (n: number): string[] =>
  github.recorded
    .filter((r) => r.method === "POST" && r.path === `/repos/acme/textkit/issues/${n}/comments`)
    .map((r) => String(r.body?.body));
const merges = (): string[] => github.recorded.filter((r) => r.method === "PUT").map((r) => r.path);

describe("improve --merge-when (fake GitHub API)", () => {
  it("both approved: merged in generation order, each outcome printed; true", async () => {
    pulls.get(7)?.reviews.push(review(1, "APPROVED", sha(1)));
    pulls.get(8)?.reviews.push(review(2, "APPROVED", sha(2)));
    const lines: string[] = [];
    const all = await mergeImprovePulls(opened(), { mergeWhen: "approved" }, (l) => lines.push(l));
    expect(all).toBe(true);
    expect(merges()).toEqual(["/repos/acme/textkit/pulls/7/merge", "/repos/acme/textkit/pulls/8/merge"]);
    expect(lines.filter((l) => /^generation \d/.test(l))).toEqual([
      expect.stringMatching(
        /^generation 1, pull request #7: merged: merged pull request #7 at 111111111111 \(approved/,
      ),
      expect.stringMatching(/^generation 2, pull request #8: merged: /),
    ]);
  });

  it("changes requested on the first: a rejection, closed saying improve makes no other attempt; the second closed naming it", async () => {
    pulls.get(7)?.reviews.push(review(1, "CHANGES_REQUESTED", sha(1), "Not like this."));
    pulls.get(8)?.reviews.push(review(2, "APPROVED", sha(2)));
    const lines: string[] = [];
    const all = await mergeImprovePulls(opened(), { mergeWhen: "approved", json: true }, (l) => lines.push(l));
    expect(all).toBe(false);
    expect(merges()).toEqual([]);
    expect(posted(7)[0]).toMatch(/^@alice requested changes on 111111111111; improve makes no other attempt/);
    expect(posted(8)[0]).toMatch(
      /^not merged: it holds the commits of generation 1, whose pull request #7 was not merged \(changes_requested\)/,
    );
    expect(pulls.get(7)?.state).toBe("closed");
    expect(pulls.get(8)?.state).toBe("closed");
    // The second was never followed: its reviews were not read.
    expect(github.recorded.some((r) => r.path.startsWith("/repos/acme/textkit/pulls/8/reviews"))).toBe(false);
    const outcomes = lines.map((l) => JSON.parse(l) as { kind: string; outcome?: string; generation?: number });
    expect(outcomes.filter((o) => o.kind === "pull_request_outcome")).toEqual([
      expect.objectContaining({ generation: 1, outcome: "changes_requested", closedByLoopsmith: true }),
      expect.objectContaining({ generation: 2, outcome: "changes_requested", closedByLoopsmith: true }),
    ]);
  });

  it("one review timeout for the run: the first merged late, the second closed when what was left ran out", async () => {
    const MINUTE = 60_000;
    let polls = 0;
    const loop = {
      pollMs: MINUTE,
      now: () => clock,
      sleep: (ms: number) => {
        clock += ms;
        polls += 1;
        if (polls === 3) pulls.get(7)?.reviews.push(review(1, "APPROVED", sha(1)));
        return Promise.resolve();
      },
    };
    const done = await followImprovePulls(
      { client, target },
      opened().pulls,
      { mergeWhen: "approved", reviewTimeout: 5 * MINUTE },
      () => undefined,
      loop,
    );
    expect(done.merged).toBe(false);
    expect(done.results.map((r) => [r.generation, r.outcome])).toEqual([
      [1, "merged"],
      [2, "timeout"],
    ]);
    // The second had what was left of the five minutes, not five of its own.
    expect(clock).toBe(5 * MINUTE);
    expect(posted(8)[0]).toMatch(/^no merge within the review timeout \(5m\): no approving review/);
  });

  it("the command refuses --merge-when without --pr github, and --review-timeout without --merge-when (exit 2)", async () => {
    const alone = await loopsmith(["improve", "--merge-when", "now"], {}, 60_000);
    expect(alone.code, alone.stderr).toBe(2);
    expect(alone.stderr).toContain("--merge-when applies with --pr github only");
    const timeout = await loopsmith(["improve", "--pr", "github", "--review-timeout", "1h"], {}, 60_000);
    expect(timeout.code, timeout.stderr).toBe(2);
    expect(timeout.stderr).toContain("--review-timeout applies with --merge-when only");
    const bad = await loopsmith(["improve", "--pr", "github", "--merge-when", "later"], {}, 60_000);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--merge-when.*later.*approved, now/);
  });
});
