/**
 * `loopsmith --env-from <file>`: variables from a dotenv file (what `deploy/compose-env.sh`
 * writes to `client.env` for the compose stack's client user), set before the command runs.
 */
import { readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import { usageError } from "./errors.js";

/**
 * Sets each variable of the file that the environment does not set (unset or empty): a
 * variable exported in the shell wins, as with docker's `--env-file` and `-e` (the flag is not named `--env-file`: Node 20 reads that one from any argument, even after the script).
 * @returns the names it set
 * @throws CliError (exit 2) when the file cannot be read
 */
export function loadEnvFile(file: string, env: NodeJS.ProcessEnv = process.env): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw usageError(`cannot read the --env-from file ${file}: ${(err as Error).message}`);
  }
  const set: string[] = [];
  for (const [name, value] of Object.entries(parseEnv(text))) {
    if (env[name] !== undefined && env[name] !== "") continue;
    env[name] = value;
    set.push(name);
  }
  return set;
}
