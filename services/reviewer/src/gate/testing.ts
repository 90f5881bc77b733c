/** Test helpers for the gate's unit tests (not exported from the package). */
import type { FileChange, Finding, GateResult, Language } from "@loopsmith/shared/contracts";
import { gate } from "./gate.js";

/** Runs the gate over files, as the service would. */
export function check(files: FileChange[], language: Language = "python"): GateResult {
  return gate({ v: 1, taskId: "t1", iteration: 1, idempotencyKey: "t1/1/gate", language, files });
}

/** Runs the gate over one file. */
export function checkOne(path: string, content: string): GateResult {
  return check([{ path, content }]);
}

/** The blocker findings of a result, as `rule@line`, for compact assertions. */
export function blockers(result: GateResult): string[] {
  return result.findings.filter((f: Finding) => f.severity === "blocker").map((f) => `${f.rule}@${f.line}`);
}

/** Joins lines into a source file (keeps test sources readable and their line numbers obvious). */
export function src(...lines: string[]): string {
  return `${lines.join("\n")}\n`;
}
