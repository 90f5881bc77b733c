/**
 * Evaluation tampering on the architect's side (docs/GATE.md "Evaluation tampering"). The reviewer's gate flags it (rules `tampering.*`); here its findings are
 * made about the change (what the base file already did is not the candidate's), the
 * uncertain ones become concerns that send the candidate to review even with review off,
 * and the clear ones reject an improvement generation (`tampering`, `improve/tampering.ts`).
 */
import type { Finding, GateRequest, GateResult } from "@loopsmith/shared/contracts";

/** True for a finding of one of the gate's tampering rules. */
export function isTampering(f: Finding): boolean {
  return f.rule?.startsWith("tampering.") ?? false;
}

/** The tampering findings that do not block: what the review must judge. */
export function tamperingConcerns(result: GateResult): Finding[] {
  return result.findings.filter((f) => isTampering(f) && f.severity !== "blocker");
}

/** `path:line` of a finding, or its path, or "" (for messages). */
export function findingPlace(f: Finding): string {
  return f.path ? `${f.path}${f.line ? `:${f.line}` : ""}` : "";
}

/**
 * The names of the evaluation, for the gate's `evaluation` field: the words of the command
 * lines (the check's, the benchmark's) and the paths (test files, a JUnit file). The gate
 * keeps the path-like ones. At most 200, duplicates removed.
 */
export function evaluationNames(
  commands: readonly (string | undefined)[],
  paths: readonly (string | undefined)[],
): string[] {
  const words = commands.flatMap((c) => (c ? c.split(/[\s;&|<>()'"`=]+/) : []));
  return [...new Set([...words, ...paths].filter((w): w is string => !!w && w.length <= 1_000))].slice(0, 200);
}

/** The key a finding is recognised by in another version of its file (its line may have moved). */
const findingKey = (f: Finding): string => `${f.path ?? ""}\u0000${f.rule ?? ""}\u0000${f.message}`;

/**
 * The gate's verdict on a change. The candidate's files are gated; when a tampering finding
 * is among the findings and `readBase` is given (repo mode, an improvement generation), the
 * base versions of the files it is in are gated too, and a tampering finding that the base
 * file already had (same path, rule and message, as many times as there) is dropped: it is
 * not the change's. Other rules' findings are kept as they are. `blocked` is recomputed.
 * @param gate - the reviewer's gate (over the bus, or the function in tests)
 * @param request - the candidate's files
 * @param readBase - a file's text at the base commit (undefined when it is new)
 * @param baseKey - the idempotency key of the base files' gate request
 */
export async function gateChange(
  gate: (req: GateRequest) => Promise<GateResult>,
  request: GateRequest,
  readBase?: (path: string) => string | undefined,
  baseKey = request.idempotencyKey,
): Promise<GateResult> {
  const result = await gate(request);
  const paths = [...new Set(result.findings.filter(isTampering).map((f) => f.path ?? ""))].filter(Boolean);
  if (!readBase || paths.length === 0) return result;
  const base = paths.flatMap((path) => {
    const content = readBase(path);
    return content === undefined ? [] : [{ path, content }];
  });
  if (base.length === 0) return result;
  const before = await gate({ ...request, idempotencyKey: baseKey, files: base });
  const old = new Map<string, number>();
  for (const f of before.findings.filter(isTampering)) old.set(findingKey(f), (old.get(findingKey(f)) ?? 0) + 1);
  const findings = result.findings.filter((f) => {
    const left = isTampering(f) ? (old.get(findingKey(f)) ?? 0) : 0;
    if (left > 0) old.set(findingKey(f), left - 1);
    return left === 0;
  });
  return { blocked: findings.some((f) => f.severity === "blocker"), findings };
}
