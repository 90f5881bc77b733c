import { describe, expect, it } from "vitest";
import type { TaskEvent } from "@loopsmith/shared/contracts";
import { DurableRun, runPhases, type PhaseMachine } from "./machine.js";
import { HandBack } from "./handback.js";

type Phase = "a" | "b" | "c";
interface State {
  phase: Phase;
  eventSeq: number;
  seen: string[];
  final?: string;
}
type End = { end: string };

class Run extends DurableRun<State> {
  async say(message: string): Promise<void> {
    await this.publish({ taskId: "job", iteration: 0, kind: "step", message });
  }
}

/** A machine a → b → c → end, whose phases note themselves; `stopAt` hands back before that phase. */
function machine(stopAt?: Phase): PhaseMachine<Phase, State, Run, End> {
  const note = (p: Phase, next: Phase | undefined) => async (s: State, run: Run) => {
    await run.say(`in ${p}`);
    const patch = { seen: [...s.seen, p] };
    return next ? { next, patch } : { end: `ended after ${p}`, patch };
  };
  return {
    phases: { a: note("a", "b"), b: note("b", "c"), c: note("c", undefined) },
    phaseOf: (s) => s.phase,
    at: (phase) => ({ phase }),
    before: async (run) => {
      if (run.s.final) return run.s;
      if (run.s.phase === stopAt) throw new HandBack("stopping");
      return undefined;
    },
    end: async (run, end) => {
      run.update({ final: end.end });
      return run.s;
    },
  };
}

function io() {
  const checkpoints: State[] = [];
  const events: TaskEvent[] = [];
  return {
    checkpoints,
    events,
    io: {
      checkpoint: async (s: State) => void checkpoints.push(s),
      emit: async (e: TaskEvent) => void events.push(e),
      heartbeat: () => undefined,
    },
  };
}

describe("runPhases", () => {
  it("checkpoints each phase's patch at the next phase, numbers the events, and ends with the last one's", async () => {
    const out = io();
    const final = await runPhases(new Run({ phase: "a", eventSeq: 4, seen: [] }, out.io), machine());
    expect(out.checkpoints.map((c) => [c.phase, c.seen.join("")])).toEqual([
      ["b", "a"],
      ["c", "ab"],
    ]);
    expect(final).toMatchObject({ final: "ended after c", seen: ["a", "b", "c"], eventSeq: 7 });
    expect(out.events.map((e) => [e.seq, e.message])).toEqual([
      [4, "in a"],
      [5, "in b"],
      [6, "in c"],
    ]);
  });

  it("a job handed back resumes from its last checkpoint at its phase, repeating no finished phase", async () => {
    const first = io();
    await expect(runPhases(new Run({ phase: "a", eventSeq: 0, seen: [] }, first.io), machine("c"))).rejects.toThrow(
      HandBack,
    );
    const saved = first.checkpoints.at(-1) as State;
    expect(saved.phase).toBe("c");
    const second = io();
    const final = await runPhases(new Run(saved, second.io), machine());
    expect(second.events.map((e) => e.message)).toEqual(["in c"]);
    expect(final.seen).toEqual(["a", "b", "c"]);
  });
});
