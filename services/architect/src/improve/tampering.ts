/**
 * VALIDATE's tampering guard of an improvement generation: the reviewer's
 * gate over the files the change creates or changes, findings their parent versions already
 * had left out, and a clear `tampering.*` finding → decision reason `tampering`. Asked
 * before the check's outcome is looked at: a change that tampers with the evaluation is
 * rejected as such, whatever its check said.
 */
import {
  idempotencyKey,
  type FileChange,
  type GateRequest,
  type GateResult,
  type Language,
} from "@loopsmith/shared/contracts";
import { findingPlace, gateChange, isTampering } from "../tampering.js";
import type { Violation } from "./guards.js";
import { candidateFiles } from "../tree.js";

/** How many findings a rejection lists. */
const LISTED = 5;

/**
 * A clear tampering finding on an improvement candidate's change → `tampering`. The message
 * says what was seen and where (`path:line`), for up to 5 findings.
 * @param result - the gate's verdict on the change (from {@link gateChange})
 */
export function tamperingViolation(result: GateResult): Violation | undefined {
  const clear = result.findings.filter((f) => isTampering(f) && f.severity === "blocker");
  if (clear.length === 0) return undefined;
  const listed = clear
    .slice(0, LISTED)
    .map((f) => `${findingPlace(f)}: ${f.message} (${f.rule})`)
    .join("; ");
  const more = clear.length > LISTED ? ` and ${clear.length - LISTED} more` : "";
  return {
    reason: "tampering",
    message: `the change tampers with the evaluation: ${listed}${more}`,
    paths: [...new Set(clear.map((f) => f.path ?? ""))].filter(Boolean),
  };
}

/** The change's changed and created files in full; none when its patch does not apply to the parent (VALIDATE fails on that later). */
function changedFiles(
  change: { patch: string; deleted: string[] },
  read: (path: string) => string | undefined,
): FileChange[] {
  try {
    return candidateFiles(change, read).files;
  } catch {
    return [];
  }
}

/**
 * VALIDATE's tampering guard of an improvement generation: the gate over the files the
 * change creates or changes (with the evaluation's names), findings their parent versions
 * already had left out ({@link gateChange}); a clear tampering finding → `tampering`
 * ({@link tamperingViolation}). The gate's requests are steps `validate_gate` and `validate_gate_base` of the
 * generation's task.
 * @param gate - the reviewer's gate
 * @param change.patch - the change, a git-style unified diff against the parent tree
 * @param change.deleted - the paths it deletes (not code any more)
 * @param change.read - a file's text in the parent tree
 * @param change.evaluation - the benchmark's and the check's command lines and files
 */
export async function changeTampering(
  gate: (req: GateRequest) => Promise<GateResult>,
  change: {
    taskId: string;
    generation: number;
    language: Language;
    patch: string;
    deleted: string[];
    read: (path: string) => string | undefined;
    evaluation: string[];
  },
): Promise<Violation | undefined> {
  const files = changedFiles(change, change.read);
  if (files.length === 0) return undefined;
  const { taskId, generation } = change;
  const request: GateRequest = {
    v: 1,
    taskId,
    iteration: generation,
    idempotencyKey: idempotencyKey(taskId, generation, "validate_gate"),
    language: change.language,
    files,
    evaluation: change.evaluation,
  };
  return tamperingViolation(
    await gateChange(gate, request, change.read, idempotencyKey(taskId, generation, "validate_gate_base")),
  );
}
