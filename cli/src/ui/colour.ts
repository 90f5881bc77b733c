/**
 * Terminal colour for every command, through `picocolors`. Whether a stream gets colour is
 * Node's own rule (`tty.WriteStream#getColorDepth`, the rule `util.styleText` applies):
 * `FORCE_COLOR` (`0`/`false` off, `1`/`2`/`3`/empty on) decides when set, even for a pipe or
 * a file; otherwise colour needs a terminal, and `NO_COLOR`, `NODE_DISABLE_COLORS` or
 * `TERM=dumb` turn it off (https://no-color.org). Cursor movement is not colour and stays with
 * `terminal.ts`.
 */
import { WriteStream } from "node:tty";
import pc from "picocolors";

/** The colour functions (`green`, `dim`, …): each wraps its text in SGR codes, or returns it unchanged when colour is off. */
export type Palette = ReturnType<typeof pc.createColors>;

/** The part of an output stream the colour decision reads. */
export interface ColourTarget {
  isTTY?: boolean;
  getColorDepth?: (env?: NodeJS.ProcessEnv) => number;
}

/**
 * Whether output written to `stream` gets colour (see the module note for the rule). Pure but
 * for `env`, which it reads.
 * @param env - the environment (default `process.env`)
 */
export function colourEnabled(stream: ColourTarget, env: NodeJS.ProcessEnv = process.env): boolean {
  // getColorDepth reads only env (FORCE_COLOR first, then NO_COLOR, NODE_DISABLE_COLORS, TERM…).
  const depth = (e: NodeJS.ProcessEnv): number => WriteStream.prototype.getColorDepth.call(stream, e);
  if (env.FORCE_COLOR !== undefined) return depth(env) > 2;
  return stream.isTTY === true && depth(env) > 2;
}

/**
 * Colour functions for output to `stream` (or, given a boolean, on or off outright): plain
 * text when {@link colourEnabled} says no.
 */
export function palette(target: ColourTarget | boolean, env: NodeJS.ProcessEnv = process.env): Palette {
  return pc.createColors(typeof target === "boolean" ? target : colourEnabled(target, env));
}
