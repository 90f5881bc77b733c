/**
 * Masking secrets for display (`loopsmith config show`, logs of URLs): by name (keys,
 * environment variables, URL parameters), by place (URL user info) and by form (API-key
 * shaped values anywhere). Pure functions; they never throw.
 */
import type { Config } from "./config.js";

type Json = { [k: string]: unknown };

/**
 * Names (configuration keys, environment variable names, URL query parameters) whose values
 * are secrets: `apiKey`, `api_key`, `key`, `token`, `access_token`, `password`, `sslpassword`,
 * `pass`, `pwd`, `secret`, `client_secret`, `credential`, `signature`, `sig`, `auth`, …
 */
const SECRET_NAME =
  /^(?:key|pass|pwd|auth|sig|code)$|api[-_]?key|access[-_]?key|private[-_]?key|secret|token|passw(?:or)?d|passphrase|credential|signature|authori[sz]ation|cookie/i;
/** Names of URL-valued keys (`natsUrl`, `databaseUrl`, `baseUrl`, `NATS_URL`, …). */
const URL_NAME = /(?:url|uri|dsn|endpoint)$/i;
/** Values that are secrets by their form wherever they sit (Anthropic/OpenAI, GitHub, Slack, AWS, Google, Hugging Face keys). */
const SECRET_VALUE =
  /(?<![A-Za-z0-9_-])(?:sk-(?:ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{30,})/g;
const MASK = "[masked]";

function isSecretName(name: string): boolean {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name);
  } catch {
    /* keep as is */
  }
  return SECRET_NAME.test(decoded);
}

/** One URL (or a libpq-style `key=value` string): user info and secret parameters masked. */
function maskOneUrl(url: string): string {
  const scheme = /^\s*[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? "";
  const rest = url.slice(scheme.length);
  const q = rest.search(/[?#]/);
  const beforeQuery = q < 0 ? rest : rest.slice(0, q);
  // User info runs to the last "@" before the query: a password may hold "@", "/" or ":".
  const at = beforeQuery.lastIndexOf("@");
  const head = at < 0 ? beforeQuery : `${MASK}@${beforeQuery.slice(at + 1)}`;
  return `${scheme}${head}${q < 0 ? "" : rest.slice(q)}`.replace(
    /(^|[?&#;\s])([^=&?#;\s]+)=([^&#;\s]*)/g,
    (m, sep: string, name: string, value: string) => (value && isSecretName(name) ? `${sep}${name}=${MASK}` : m),
  );
}

/**
 * A URL with its credentials masked: the whole user info (`user:password@`, a token-only
 * `token@`), query, fragment and `;`-parameters named like secrets (`key`, `api_key`,
 * `token`, `password`, `sslpassword`, `secret`, …), `key=value` pairs of a libpq-style
 * connection string, and values that look like API keys. A comma-separated list of URLs
 * (NATS servers) is masked URL by URL. Pure; never throws.
 */
export function maskUrl(url: string): string {
  return url
    .split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)
    .map(maskOneUrl)
    .join(",")
    .replace(SECRET_VALUE, MASK);
}

/**
 * A copy of the configuration (or any JSON tree) with secrets masked, for `config show`:
 * string values under secret-looking keys anywhere in the tree, in objects and arrays
 * (`apiKey`, `token`, `password`, `secret`, `ANTHROPIC_API_KEY`, …; a long API key keeps
 * its first 4 characters); URL-valued keys (`natsUrl`, `databaseUrl`, `baseUrl`, …) and every
 * string that looks like a URL, through {@link maskUrl}; and API-key-looking values anywhere.
 */
export function maskConfig(cfg: Config | Json): Json {
  const mask = (v: unknown, key: string): unknown => {
    if (typeof v === "string") {
      // An API key keeps its first 4 characters (which key it is); other secrets show nothing.
      if (isSecretName(key)) return /api[-_]?key/i.test(key) && v.length > 16 ? `${v.slice(0, 4)}…${MASK}` : MASK;
      if (URL_NAME.test(key) || /^\s*[a-z][a-z0-9+.-]*:\/\//i.test(v)) return maskUrl(v);
      return v.replace(SECRET_VALUE, MASK);
    }
    if (Array.isArray(v)) return v.map((x) => mask(x, key));
    if (typeof v === "object" && v !== null)
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mask(x, k)]));
    return v;
  };
  return mask(cfg, "") as Json;
}
