/**
 * The benchmark of examples/self-improve. Each line of cases.jsonl is a labelled pair of failure
 * texts, `{"case", "a", "b", "same"}`; a case passes when services/memory/src/signature.ts gives
 * `a` and `b` the same signature exactly when they are the same mistake (`same`).
 *
 * Prints one JSON object per case and line, `{"case": "<id>", "pass": true|false}`, then a
 * summary on stderr, and exits 0: a failing case is a result, not a crash.
 *
 * In the sandbox: `node --import /opt/loopsmith/ts-register.mjs examples/self-improve/bench.ts`
 * (the loader maps the `.js` specifier below to `signature.ts`, as tsx and vitest do).
 */
import { readFileSync } from "node:fs";
import { signature } from "../../services/memory/src/signature.js";

interface Case {
  case: string;
  a: string;
  b: string;
  same: boolean;
}

const text = readFileSync(new URL("./cases.jsonl", import.meta.url), "utf8");
const cases = text
  .split("\n")
  .filter((line) => line.trim() !== "")
  .map((line) => JSON.parse(line) as Case);

let passed = 0;
for (const c of cases) {
  let pass = false;
  try {
    pass = (signature(c.a).signature === signature(c.b).signature) === c.same;
  } catch {
    pass = false; // signature() must never throw; if it does, the case fails
  }
  if (pass) passed++;
  process.stdout.write(`${JSON.stringify({ case: c.case, pass })}\n`);
}
process.stderr.write(`self-improve bench: ${passed}/${cases.length} cases pass\n`);
