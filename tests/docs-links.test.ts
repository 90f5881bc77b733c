/**
 * Every relative link in the root's Markdown files (README.md, CONTRIBUTING.md, SECURITY.md) and docs/*.md resolves: the file or folder it names exists,
 * and a `#fragment` names a heading of the Markdown file it points to (GitHub's anchors: the
 * heading lower-cased, punctuation other than `-` and `_` dropped, spaces as `-`).
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "./fixtures/cli.js";

/** The Markdown files whose links are checked, relative to the repository root: the root's and docs/'s. */
const FILES = [
  ...readdirSync(REPO).filter((f) => f.endsWith(".md")),
  ...readdirSync(join(REPO, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor of a heading's text. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a Markdown file's headings (outside code blocks); repeats get `-1`, `-2`. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = anchor(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The relative link targets of a Markdown file (outside code blocks and inline code). */
function links(file: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    const text = line.replace(/`[^`]*`/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1] as string;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) out.push(target);
    }
  }
  return out;
}

describe("links in README.md and docs/", () => {
  it.each(FILES)("%s: every relative link resolves", (file) => {
    const from = join(REPO, file);
    const broken: string[] = [];
    for (const target of links(from)) {
      const [path, fragment] = target.split("#") as [string, string | undefined];
      const resolved = path === "" ? from : join(dirname(from), decodeURIComponent(path));
      if (!existsSync(resolved)) {
        broken.push(`${target}: no ${relative(REPO, resolved)}`);
        continue;
      }
      if (fragment && resolved.endsWith(".md") && statSync(resolved).isFile() && !anchors(resolved).has(fragment)) {
        broken.push(`${target}: no heading #${fragment} in ${relative(REPO, resolved)}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("finds the links it checks (the README links to docs/)", () => {
    expect(links(join(REPO, "README.md"))).toContain("docs/OPERATIONS.md");
    expect(FILES).toEqual(expect.arrayContaining(["README.md", "CONTRIBUTING.md", "SECURITY.md", "docs/CLI.md"]));
  });
});
