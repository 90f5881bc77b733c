/**
 * git through simple-git with a vetted environment: the CLI's repo mode and the SWE-bench
 * grader (@loopsmith/evals) both run git on a user's or an instance's work tree. Imported as
 * `@loopsmith/shared/git` only (not re-exported by the indexes): the services never run git,
 * and their bundles leave simple-git out.
 */
import { simpleGit, type SimpleGit } from "simple-git";

/**
 * The environment git runs with: what it needs to find itself and the user's configuration,
 * and the user's GIT_* identity and location variables; no editor or pager (simple-git refuses
 * an environment that names an editor or pager it did not vet, and nothing here needs one).
 */
function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (
      ["PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_CONFIG_HOME", "SSL_CERT_FILE"].includes(k) ||
      /^GIT_(AUTHOR|COMMITTER)_(NAME|EMAIL|DATE)$|^GIT_CONFIG_(GLOBAL|SYSTEM|NOSYSTEM)$/.test(k)
    )
      env[k] = v;
  }
  return { ...env, LC_ALL: "C", ...extra };
}

/**
 * simple-git at `dir` with the environment of {@link gitEnv} (plus `extra`, which wins).
 * @param dir - the work tree (or any directory inside it) git runs in
 */
export function git(dir: string, extra: Record<string, string> = {}): SimpleGit {
  const env = gitEnv(extra);
  // simple-git drops or refuses GIT_* variables unless they are named here.
  return simpleGit({
    baseDir: dir,
    trimmed: true,
    allowEnvironment: Object.keys(env).filter((k) => k.startsWith("GIT_")),
  }).env(env);
}
