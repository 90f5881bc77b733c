/**
 * JUnit XML (pytest's `--junitxml`, node's `--test-reporter=junit`) to {@link TestCase}s.
 */
import { XMLParser, XMLValidator } from "fast-xml-parser";
import type { TestCase } from "@loopsmith/shared/contracts";

/** Longest failure message kept per test case, in characters (the contract's cap). */
const MESSAGE_LIMIT = 8_000;

type Node = Record<string, unknown>;

const parser = (): XMLParser =>
  new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "@_",
    textNodeName: "#text",
    parseAttributeValue: false,
    parseTagValue: false,
    processEntities: true,
    isArray: (name) => ["testsuite", "testcase", "failure", "error", "skipped"].includes(name),
  });

function str(v: unknown): string {
  return typeof v === "string" ? v : v === undefined || v === null ? "" : String(v);
}

function messageOf(items: unknown): string | undefined {
  if (!Array.isArray(items) || items.length === 0) return undefined;
  const first = items[0] as Node | string;
  if (typeof first === "string") return first.slice(0, MESSAGE_LIMIT);
  const message = str(first["@_message"]);
  const body = str(first["#text"]);
  const text = message && body ? `${message}\n${body}` : message || body;
  return text.slice(0, MESSAGE_LIMIT);
}

function collect(node: Node, into: TestCase[]): void {
  for (const tc of (node.testcase as Node[] | undefined) ?? []) {
    const time = Number(str(tc["@_time"]));
    const failure = messageOf(tc.failure);
    const error = messageOf(tc.error);
    const skipped = Array.isArray(tc.skipped) && tc.skipped.length > 0;
    const status: TestCase["status"] =
      failure !== undefined ? "failed" : error !== undefined ? "error" : skipped ? "skipped" : "passed";
    const test: TestCase = {
      name: str(tc["@_name"]),
      classname: str(tc["@_classname"]),
      status,
      durationMs: Number.isFinite(time) && time > 0 ? Math.round(time * 1000 * 1000) / 1000 : 0,
    };
    const message = failure ?? error ?? (skipped ? messageOf(tc.skipped) : undefined);
    if (message) test.message = message;
    into.push(test);
  }
  for (const suite of (node.testsuite as Node[] | undefined) ?? []) collect(suite, into);
}

/**
 * Parses JUnit XML into test cases, in document order (nested suites included).
 * A test case with a `<failure>` is `failed`, with an `<error>` is `error`, with a
 * `<skipped>` is `skipped`, else `passed`. `durationMs` is the `time` attribute in ms.
 * @returns null when the text is not parseable XML (the caller keeps the run's status).
 */
export function parseJUnit(xml: string): TestCase[] | null {
  let doc: Node;
  if (XMLValidator.validate(xml) !== true) return null;
  try {
    doc = parser().parse(xml) as Node;
  } catch {
    return null;
  }
  const cases: TestCase[] = [];
  const root = (doc.testsuites as Node | undefined) ?? doc;
  if (typeof root !== "object" || root === null) return cases;
  collect(root, cases);
  return cases;
}
