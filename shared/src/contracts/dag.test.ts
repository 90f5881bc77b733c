import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DagPlan,
  TaskId,
  childTaskId,
  dependenciesOf,
  dependencyOrder,
  dependentsOf,
  validateDagPlan,
  type DagPlanInput,
} from "./index.js";

/** A plan from short subtask specs: `id: [dependsOn], files, provides, uses`. */
function plan(
  subtasks: Array<{
    id: string;
    deps?: string[];
    files?: string[];
    provides?: string[];
    uses?: string[];
    tests?: string[];
  }>,
): DagPlan {
  const input: DagPlanInput = {
    summary: "a REST API for todo items",
    subtasks: subtasks.map((s) => ({
      id: s.id,
      goal: `build ${s.id}`,
      files: s.files ?? [`${s.id}.py`],
      provides: (s.provides ?? []).map((name) => ({ name, description: `${name} of ${s.id}` })),
      uses: s.uses ?? [],
      dependsOn: s.deps ?? [],
      acceptanceTests: (s.tests ?? []).map((path) => ({ path, content: "def test_ok():\n    assert True\n" })),
    })),
  };
  return DagPlan.parse(input);
}

/** The REST API example's shape: model → storage → handlers → server; validation beside storage. */
const restApi = (): DagPlan =>
  plan([
    { id: "model", provides: ["Todo"] },
    { id: "storage", deps: ["model"], provides: ["TodoStore"], uses: ["Todo"] },
    { id: "validation", deps: ["model"], provides: ["validate_todo"], uses: ["Todo"] },
    {
      id: "handlers",
      deps: ["storage", "validation"],
      provides: ["handle"],
      uses: ["TodoStore", "validate_todo", "Todo"],
    },
    { id: "server", deps: ["handlers"], uses: ["handle"], tests: ["tests/test_server.py"] },
  ]);

describe("validateDagPlan", () => {
  it("accepts a plan whose dependencies, files and interfaces line up", () => {
    expect(validateDagPlan(restApi())).toEqual([]);
  });

  it("names the subtask with a duplicate id", () => {
    const problems = validateDagPlan(
      plan([
        { id: "model", files: ["a.py"] },
        { id: "model", files: ["b.py"] },
      ]),
    );
    expect(problems).toEqual([expect.objectContaining({ kind: "duplicate_id", subtasks: ["model"] })]);
    expect(problems[0]!.message).toContain('"model"');
  });

  it("names the subtask and the dependency that is not in the plan", () => {
    const problems = validateDagPlan(plan([{ id: "model" }, { id: "server", deps: ["handlers"] }]));
    expect(problems).toEqual([
      expect.objectContaining({ kind: "unknown_dependency", subtasks: ["server", "handlers"] }),
    ]);
    expect(problems[0]!.message).toBe('subtask "server" depends on "handlers", which is not in the plan');
  });

  it("names every subtask of a cycle, in dependency order", () => {
    const problems = validateDagPlan(
      plan([
        { id: "a", deps: ["c"] },
        { id: "b", deps: ["a"] },
        { id: "c", deps: ["b"] },
        { id: "d", deps: ["a"] },
      ]),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]!.kind).toBe("cycle");
    expect(new Set(problems[0]!.subtasks)).toEqual(new Set(["a", "b", "c"]));
    expect(problems[0]!.message).toMatch(/^a dependency cycle: /);
    for (const id of ["a", "b", "c"]) expect(problems[0]!.message).toContain(`"${id}"`);
    expect(problems[0]!.message).not.toContain('"d"');
  });

  it("catches a subtask that depends on itself", () => {
    const problems = validateDagPlan(plan([{ id: "a", deps: ["a"] }]));
    expect(problems).toEqual([
      expect.objectContaining({ kind: "cycle", subtasks: ["a"], message: 'a dependency cycle: "a" depends on itself' }),
    ]);
  });

  it("catches two unordered subtasks owning one file, also through an acceptance test", () => {
    const problems = validateDagPlan(
      plan([
        { id: "model", files: ["app/model.py"] },
        { id: "storage", deps: ["model"], files: ["app/storage.py", "app/util.py"] },
        { id: "validation", deps: ["model"], files: ["app/validation.py", "app/util.py"] },
        { id: "server", files: ["app/server.py"], tests: ["app/model.py"] },
      ]),
    );
    expect(problems.map((p) => [p.kind, p.subtasks])).toEqual([
      ["file_conflict", ["model", "server"]],
      ["file_conflict", ["storage", "validation"]],
    ]);
    expect(problems[1]!.message).toBe(
      'subtasks "storage" and "validation" both own app/util.py and neither depends on the other',
    );
  });

  it("allows one file to two subtasks when one depends on the other, even indirectly", () => {
    const problems = validateDagPlan(
      plan([
        { id: "model", files: ["app.py"] },
        { id: "storage", deps: ["model"], files: ["store.py"] },
        { id: "server", deps: ["storage"], files: ["app.py"] },
      ]),
    );
    expect(problems).toEqual([]);
  });

  it("catches an interface used but provided by no dependency, naming the provider that is not one", () => {
    const problems = validateDagPlan(
      plan([
        { id: "model", provides: ["Todo"] },
        { id: "storage", provides: ["TodoStore"] },
        { id: "handlers", deps: ["model"], uses: ["Todo", "TodoStore", "Router"] },
      ]),
    );
    expect(problems).toEqual([
      {
        kind: "interface_missing",
        subtasks: ["handlers", "storage"],
        message:
          'subtask "handlers" uses TodoStore, but it is provided by "storage", which "handlers" does not depend on',
      },
      {
        kind: "interface_missing",
        subtasks: ["handlers"],
        message: 'subtask "handlers" uses Router, but no subtask provides it',
      },
    ]);
  });

  it("rejects a malformed plan at the schema: bad ids, absolute paths, no subtasks", () => {
    expect(DagPlan.safeParse({ summary: "x", subtasks: [] }).success).toBe(false);
    expect(DagPlan.safeParse({ summary: "x", subtasks: [{ id: "Model", goal: "g", files: ["a.py"] }] }).success).toBe(
      false,
    );
    expect(
      DagPlan.safeParse({ summary: "x", subtasks: [{ id: "model", goal: "g", files: ["/etc/passwd"] }] }).success,
    ).toBe(false);
    expect(DagPlan.safeParse({ summary: "x", subtasks: [{ id: "model", goal: "g", files: [] }] }).success).toBe(false);
  });
});

describe("dependency helpers", () => {
  it("orders, and finds dependents and dependencies transitively", () => {
    const p = restApi();
    const order = dependencyOrder(p);
    for (const s of p.subtasks) for (const d of s.dependsOn) expect(order.indexOf(d)).toBeLessThan(order.indexOf(s.id));
    expect(new Set(dependentsOf(p, "storage"))).toEqual(new Set(["handlers", "server"]));
    expect(dependentsOf(p, "server")).toEqual([]);
    expect(new Set(dependenciesOf(p, "handlers"))).toEqual(new Set(["model", "storage", "validation"]));
    expect(dependenciesOf(p, "handlers")[0]).toBe("model");
  });

  it("validates any random acyclic plan, and finds a cycle once an edge closes one", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 30 }),
        (n, pairs) => {
          // Edges only from a lower to a higher index: acyclic by construction.
          const deps = Array.from({ length: n }, () => new Set<string>());
          for (const [a, b] of pairs) {
            const [lo, hi] = [a % n, b % n].sort((x, y) => x - y) as [number, number];
            if (lo !== hi) deps[hi]!.add(`s${lo}`);
          }
          const subtasks = deps.map((d, i) => ({ id: `s${i}`, deps: [...d] }));
          expect(validateDagPlan(plan(subtasks))).toEqual([]);
          const last = subtasks[n - 1]!;
          const first = subtasks[0]!;
          const closed = subtasks.map((s) => (s === first ? { ...s, deps: [...s.deps, last.id] } : s));
          const reaches = last.deps.length > 0 && dependenciesOf(plan(subtasks), last.id).includes(first.id);
          const kinds = validateDagPlan(plan(closed)).map((p) => p.kind);
          expect(kinds.includes("cycle")).toBe(reaches);
        },
      ),
    );
  });
});

describe("childTaskId", () => {
  it("is the parent, the subtask and the attempt, and a valid task id", () => {
    expect(childTaskId("t-123", "storage", 2)).toBe("t-123--storage-a2");
  });

  it("stays a distinct, valid task id when the parent id is long", () => {
    const a = childTaskId("x".repeat(60) + "aaaa", "handlers", 12);
    const b = childTaskId("x".repeat(60) + "bbbb", "handlers", 12);
    expect(a).not.toBe(b);
    for (const id of [a, b]) {
      expect(TaskId.safeParse(id).success).toBe(true);
      expect(id.endsWith("--handlers-a12")).toBe(true);
    }
  });
});
