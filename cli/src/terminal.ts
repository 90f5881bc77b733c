/**
 * Text for a terminal. Output of sandboxed code (test output, stack traces, test and file
 * names) and model-written text (messages, files) can hold control characters: an ANSI/OSC
 * escape can move the cursor, erase lines, set the window title or, on some terminals, write
 * to the clipboard. Everything the CLI prints for people goes through {@link printable};
 * everything it prints as JSON goes through {@link jsonLine}, which stays lossless.
 */

/**
 * Characters neutralised by {@link printable}: C0 controls except tab and newline, DEL, the
 * C1 controls (U+0080–U+009F; U+009B is an 8-bit CSI on some terminals) and the bidi
 * embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069), which reorder
 * what is shown.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Characters JSON.stringify leaves raw that a terminal may act on (C0 it escapes itself). */
const JSON_UNSAFE = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function hex(ch: string): string {
  const c = ch.codePointAt(0) ?? 0;
  return c <= 0xff ? `\\x${c.toString(16).padStart(2, "0")}` : `\\u${c.toString(16).padStart(4, "0")}`;
}

/**
 * `text` safe to print on a terminal: every unsafe character (see above) is shown as a
 * visible escape (`ESC` as `\x1b`, a lone carriage return as `\x0d`, U+202E as `\u202e`);
 * newlines, tabs and all other text are kept; `\r\n` line ends become `\n`.
 * Pure; never throws.
 */
export function printable(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(UNSAFE, hex);
}

/**
 * `value` as JSON with no character a terminal acts on: JSON.stringify escapes C0 controls
 * itself; DEL, C1, U+2028/U+2029 and bidi controls are written as `\uXXXX` escapes too.
 * Lossless: `JSON.parse(jsonLine(v))` equals `JSON.parse(JSON.stringify(v))`.
 * @param space - indentation as for JSON.stringify; none (one line) by default
 */
export function jsonLine(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(JSON_UNSAFE, (ch) => `\\u${(ch.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`);
}
