import { describe, expect, it } from "vitest";
import { DagState, dagProgress, type DagProgress, type SubtaskProgress } from "@loopsmith/shared/contracts";
import { changedSubtaskLines, dagOf, dagTotals, dagTree, renderDagTree, subtaskSummary } from "./dag-view.js";

const T0 = Date.parse("2026-03-01T10:00:00.000Z");
const at = (s: number): string => new Date(T0 + s * 1000).toISOString();

function sub(
  id: string,
  status: SubtaskProgress["status"],
  dependsOn: string[] = [],
  extra: Partial<SubtaskProgress> = {},
): SubtaskProgress {
  return {
    id,
    goal: `build ${id}`,
    status,
    dependsOn,
    attempt: 0,
    iteration: 0,
    iterations: 0,
    tokens: 0,
    costUsd: 0,
    ...extra,
  };
}

/** schema → store, auth; api needs store and auth; cli needs auth; docs stands alone. */
function progress(): DagProgress {
  return {
    reopened: [],
    subtasks: [
      sub("schema", "passed", [], {
        attempt: 1,
        iterations: 2,
        tokens: 12_345,
        costUsd: 0.0412,
        startedAt: at(0),
        finishedAt: at(80),
      }),
      sub("store", "running", ["schema"], {
        attempt: 2,
        iteration: 3,
        iterations: 4,
        tokens: 900,
        costUsd: 0.002,
        startedAt: at(80),
      }),
      sub("api", "pending", ["store", "auth"]),
      sub("auth", "failed", ["schema"], {
        attempt: 3,
        iterations: 15,
        tokens: 55_000,
        costUsd: 0.31,
        startedAt: at(80),
        finishedAt: at(300),
        reason: "max_iterations",
      }),
      sub("cli", "cancelled", ["auth"], { reason: "dependency_failed", finishedAt: at(300) }),
      sub("docs", "pending"),
    ],
  };
}

describe("renderDagTree", () => {
  it("one line per subtask in dependency order, each under its dependency, with the state of each status", () => {
    const lines = renderDagTree(progress(), T0 + 400_000);
    expect(lines).toEqual([
      "✔ schema     passed · attempt 1 · 2 iterations · 12.3k tokens · $0.04 · 1 min 20 s",
      "├─ ▶ store   running · attempt 2 · iteration 3 · 5 min 20 s",
      "└─ ✖ auth    failed (max_iterations) · attempt 3 · 15 iterations · 55.0k tokens · $0.31 · 3 min 40 s",
      "   ├─ ○ api  pending · waiting for store, auth",
      "   └─ ⊘ cli  cancelled (dependency_failed)",
      "○ docs       pending",
    ]);
  });

  it("a running subtask's time is measured to now; an ended one's from its start to its end", () => {
    const p = progress();
    expect(renderDagTree(p, T0 + 90_000)[1]).toMatch(/iteration 3 · 10\.0 s$/);
    expect(renderDagTree(p, T0 + 90_000)[0]).toMatch(/1 min 20 s$/);
    expect(renderDagTree(p, T0 + 900_000)[0]).toMatch(/1 min 20 s$/);
  });

  it("a running subtask not yet in an iteration, and a re-opened one, say so", () => {
    const p: DagProgress = { reopened: ["a"], subtasks: [sub("a", "running", [], { attempt: 4, startedAt: at(0) })] };
    expect(renderDagTree(p, T0 + 2_000)).toEqual(["▶ a  running · attempt 4 · 2.0 s · re-opened"]);
  });

  it("colours only the mark; cuts lines to a width; neutralises what the model wrote", () => {
    const p = progress();
    const colored = renderDagTree(p, T0 + 400_000, { color: true });
    expect(colored[0]).toBe(`\x1b[32m✔\x1b[39m${renderDagTree(p, T0 + 400_000)[0]?.slice(1)}`);
    expect(colored[3]).toContain("   ├─ \x1b[2m○\x1b[22m api");
    const narrow = renderDagTree(p, T0 + 400_000, { width: 30 });
    for (const l of narrow) expect(l.length).toBeLessThanOrEqual(30);
    expect(narrow[0]).toBe("✔ schema     passed · attempt…");
    const hostile: DagProgress = {
      reopened: [],
      subtasks: [
        sub("a", "failed", [], { goal: "x\x1b[2J", reason: "boom\x1b]0;t\x07", startedAt: at(0), finishedAt: at(1) }),
      ],
    };
    const [line] = renderDagTree(hostile, T0, { goals: true });
    // eslint-disable-next-line no-control-regex
    expect(line).not.toMatch(/[\u0000-\u0008\u000b-\u001f]/);
    expect(line).toContain("failed (boom\\x1b]0;t\\x07)");
    expect(line).toMatch(/ — x\\x1b\[2J$/);
  });

  it("renders what the architect publishes (dagProgress of a DAG state)", () => {
    const state = DagState.parse({
      plan: {
        summary: "two steps",
        subtasks: [
          { id: "lib", goal: "write lib.py\nwith details", files: ["lib.py"] },
          { id: "app", goal: "write app.py", files: ["app.py"], dependsOn: ["lib"] },
        ],
      },
      subtasks: [
        {
          id: "lib",
          status: "passed",
          attempts: 1,
          iterations: 2,
          usage: {
            calls: 2,
            inputTokens: 1_000,
            outputTokens: 200,
            cacheReadTokens: 0,
            cacheWriteTokens: 0,
            costUsd: 0.01,
            latencyMs: 1,
          },
          startedAt: at(0),
          finishedAt: at(30),
        },
        { id: "app", status: "running", attempts: 1, startedAt: at(30) },
      ],
    });
    const lines = renderDagTree(dagProgress(state, { app: 2 }), T0 + 45_000, { goals: true });
    expect(lines).toEqual([
      "✔ lib     passed · attempt 1 · 2 iterations · 1.2k tokens · $0.01 · 30.0 s — write lib.py",
      "└─ ▶ app  running · attempt 1 · iteration 2 · 15.0 s — write app.py",
    ]);
  });
});

describe("the tree's order and shape", () => {
  const ids = (p: DagProgress["subtasks"]): string[] => dagTree(p).map((x) => `${x.prefix}${x.subtask.id}`);

  it("a diamond: the join goes under the dependency drawn last, after both", () => {
    expect(
      ids([sub("a", "passed"), sub("d", "pending", ["b", "c"]), sub("b", "passed", ["a"]), sub("c", "passed", ["a"])]),
    ).toEqual(["a", "├─ b", "└─ c", "   └─ d"]);
  });

  it("every subtask comes after all its dependencies, even when its first dependency's branch is left first", () => {
    // v depends on p (a branch under a) and on d (a branch under b): it can only come after d.
    const subs = [
      sub("a", "passed"),
      sub("b", "passed"),
      sub("p", "passed", ["a"]),
      sub("d", "passed", ["b"]),
      sub("v", "pending", ["p", "d"]),
    ];
    const placed = dagTree(subs);
    const order = placed.map((x) => x.subtask.id);
    for (const s of subs)
      for (const d of s.dependsOn) expect(order.indexOf(d), `${d} before ${s.id}`).toBeLessThan(order.indexOf(s.id));
    expect(ids(subs)).toEqual(["a", "└─ p", "b", "└─ d", "   └─ v"]);
    expect(placed.find((x) => x.subtask.id === "v")).toMatchObject({ parent: "d", depth: 2 });
  });

  it("a chain nests; unknown dependencies are left out; a cycle still shows every subtask once", () => {
    expect(ids([sub("c", "pending", ["b"]), sub("b", "pending", ["a"]), sub("a", "pending", ["ghost"])])).toEqual([
      "a",
      "└─ b",
      "   └─ c",
    ]);
    expect(ids([sub("x", "pending", ["y"]), sub("y", "pending", ["x"])])).toEqual(["x", "└─ y"]);
  });
});

describe("subtaskSummary", () => {
  it("a pending subtask names what it waits for; a cancelled one after an attempt shows its usage", () => {
    expect(subtaskSummary(sub("a", "pending"), T0, { waitingFor: ["b", "c"] })).toBe("pending · waiting for b, c");
    const cancelled = sub("a", "cancelled", [], {
      reason: "cancelled",
      attempt: 1,
      iterations: 1,
      tokens: 10,
      costUsd: 0.001,
      startedAt: at(0),
      finishedAt: at(5),
    });
    expect(subtaskSummary(cancelled, T0)).toBe(
      "cancelled (cancelled) · attempt 1 · 1 iteration · 10 tokens · $0.0010 · 5.0 s",
    );
  });
});

describe("dagTotals", () => {
  it("counts by status, sums iterations, tokens, USD and subtask time, and gives the span from first start to last end", () => {
    expect(dagTotals(progress(), T0 + 400_000)).toBe(
      "6 subtasks: 1 passed, 1 failed, 1 cancelled, 1 running, 2 pending · 21 iterations · 68.2k tokens · $0.35 · 10 min 20 s of subtask time in 6 min 40 s",
    );
    expect(dagTotals({ reopened: ["b"], subtasks: [sub("b", "pending")] }, T0)).toBe(
      "1 subtask: 1 pending · 0 iterations · 0 tokens · $0 · re-opened: b",
    );
  });
});

describe("changedSubtaskLines", () => {
  it("first every subtask, then only those whose state changed (not a running one's clock)", () => {
    const first = progress();
    expect(changedSubtaskLines(undefined, first, T0 + 100_000)).toHaveLength(6);
    expect(changedSubtaskLines(first, first, T0 + 200_000)).toEqual([]);
    const next: DagProgress = {
      reopened: [],
      subtasks: first.subtasks.map((s) =>
        s.id === "store"
          ? { ...s, iteration: 4 }
          : s.id === "docs"
            ? { ...s, status: "running", attempt: 1, startedAt: at(300) }
            : s,
      ),
    };
    expect(changedSubtaskLines(first, next, T0 + 310_000)).toEqual([
      "▶ store  running · attempt 2 · iteration 4 · 3 min 50 s",
      "▶ docs  running · attempt 1 · 10.0 s",
    ]);
    expect(changedSubtaskLines(next, { ...next, reopened: ["docs"] }, T0 + 310_000)).toEqual([
      "▶ docs  running · attempt 1 · 10.0 s · re-opened",
    ]);
  });
});

describe("dagOf", () => {
  it("reads data.dag when it meets the contract, else nothing", () => {
    expect(dagOf({ data: { dag: progress() } })).toEqual(progress());
    expect(dagOf({ data: { dag: { subtasks: [{ id: "a" }] } } })).toBeUndefined();
    expect(dagOf({ data: {} })).toBeUndefined();
    expect(dagOf({})).toBeUndefined();
  });
});
