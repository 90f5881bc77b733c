/**
 * The pure parts of repo mode's dependency layer (setup.ts): its key, its volume's name,
 * where runs mount it, and the environments of the setup container and of runs that use it.
 */
import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { commandEnv, type ImageKind } from "./commands.js";
import type { Manifest } from "./repo.js";

/** Name prefix of setup volumes; the name ends with the key's first 24 hex digits. */
export const SETUP_VOLUME_PREFIX = "loopsmith-setup-";
/** The user-defined bridge network setup containers join (created once, labelled {@link LABEL_SETUP}). */
export const SETUP_NETWORK = "loopsmith-setup";
/** Label on setup volumes, setup and helper containers (the key) and the network (`network`). */
export const LABEL_SETUP = "org.loopsmith.setup";
/** Where a Python layer is mounted: `PYTHONUSERBASE` of the setup and of the runs. */
export const DEPS_DIR = "/opt/loopsmith-deps";
/** Where a Node layer is mounted: the workspace's `node_modules`. */
export const NODE_MODULES_DIR = "/workspace/node_modules";
/** A failed setup is not run again for the same key before this long, in ms (10 min). */
export const SETUP_RETRY_MS = 10 * 60_000;
/** The state file at the root of a layer volume. */
export const SETUP_MARKER = ".loopsmith-setup.json";
/** Where the host's CA bundle is put in a setup container (from the archive, not a bind mount). */
export const CA_PATH = "/tmp/.loopsmith-ca/ca.pem";
/** Longest a setup command may run, in ms, unless the executor is told otherwise. */
export const DEFAULT_SETUP_TIMEOUT_MS = 240_000;
/**
 * Host environment variables passed to a setup container when set: proxies, registries,
 * pip's timeouts. Nothing else of the host's environment enters it.
 */
export const PASSED_THROUGH = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "npm_config_registry",
  "PIP_INDEX_URL",
  "PIP_EXTRA_INDEX_URL",
  "PIP_DEFAULT_TIMEOUT",
  "PIP_RETRIES",
] as const;

const BASE_PATH = "/usr/local/bin:/usr/bin:/bin";

/** What identifies a layer. */
export interface SetupKeyInput {
  /** The sandbox image's id (`sha256:…`), so a rebuilt image gets new layers. */
  imageId: string;
  commit: string;
  setupCommand: string;
  /** The workspace's dependency manifests (path and content hash), sorted by path. */
  manifests: readonly Manifest[];
}

/** The layer key: sha256 (hex) over the image id, commit, setup command and manifests. */
export function setupKey(i: SetupKeyInput): string {
  const body = JSON.stringify({
    v: 1,
    image: i.imageId,
    commit: i.commit,
    setup: i.setupCommand,
    manifests: i.manifests.map((m) => [m.path, m.sha256]),
  });
  return createHash("sha256").update(body).digest("hex");
}

/** The volume of a key: `loopsmith-setup-` and the key's first 24 hex digits. */
export function volumeName(key: string): string {
  return SETUP_VOLUME_PREFIX + key.slice(0, 24);
}

/** Where a kind's layer is mounted. */
export function layerTarget(kind: ImageKind): string {
  return kind === "python" ? DEPS_DIR : NODE_MODULES_DIR;
}

/** The layer's mount: read-only in runs, writable in the setup container. */
export function layerMount(kind: ImageKind, volume: string, readOnly: boolean): Docker.MountSettings {
  return { Type: "volume", Source: volume, Target: layerTarget(kind), ReadOnly: readOnly };
}

/**
 * Environment a run (and the setup) needs to see a layer: Python's user base
 * (`PYTHONUSERBASE`, so its site-packages are on `sys.path` unless `-I`/`-s`) and its `bin`
 * on PATH; Node's `node_modules/.bin` on PATH.
 */
export function layerEnv(kind: ImageKind): Record<string, string> {
  return kind === "python"
    ? { PYTHONUSERBASE: DEPS_DIR, PATH: `${DEPS_DIR}/bin:${BASE_PATH}` }
    : { PATH: `${NODE_MODULES_DIR}/.bin:${BASE_PATH}` };
}

/**
 * The setup command's whole environment: the sandbox allowlist, the layer's variables, pip
 * in user mode into the layer (`PIP_USER=1`, and `PIP_BREAK_SYSTEM_PACKAGES=1` because Debian
 * marks its Python externally managed, PEP 668), no caches kept, npm quiet; plus
 * {@link PASSED_THROUGH} from `hostEnv`, and the CA variables when a CA bundle is given.
 */
export function setupEnv(kind: ImageKind, hostEnv: NodeJS.ProcessEnv, withCa: boolean): Record<string, string> {
  const env: Record<string, string> = {
    ...commandEnv(kind === "python" ? "python" : "javascript"),
    ...layerEnv(kind),
    PYTHONUSERBASE: DEPS_DIR,
    PIP_USER: "1",
    PIP_BREAK_SYSTEM_PACKAGES: "1",
    PIP_NO_CACHE_DIR: "1",
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    PIP_NO_INPUT: "1",
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    npm_config_cache: "/tmp/.npm",
  };
  for (const name of PASSED_THROUGH) {
    const value = hostEnv[name];
    if (value) env[name] = value;
  }
  if (withCa) {
    for (const name of ["NODE_EXTRA_CA_CERTS", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "npm_config_cafile"])
      env[name] = CA_PATH;
  }
  return env;
}
