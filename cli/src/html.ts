/** HTML text for the CLI's self-contained reports (`bench/report.ts`, `transcript-view.ts`). Pure. */

/** Escapes text for HTML element content and double- or single-quoted attribute values. */
export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}
