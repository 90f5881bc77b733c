/**
 * The links of a pager: the first and last page, a window of pages around the current one,
 * and a gap marker where pages are left out, e.g. `1 … 4 5 [6] 7 8 … 20`.
 */
import { clampPage } from "./paginate.js";

/** Stands for pages left out of the pager. */
export const GAP = "…";

/**
 * Page numbers (and {@link GAP} markers) to show for page `current` of `pages`.
 * A gap never hides a single page: that page is shown instead.
 * @param {number} current the current page (clamped into range)
 * @param {number} pages
 * @param {number} [radius] pages shown on each side of the current one
 * @returns {(number | typeof GAP)[]}
 */
export function pageLinks(current, pages, radius = 2) {
  const page = clampPage(current, pages);
  const from = Math.max(1, page - radius);
  const to = Math.min(pages, page + radius);
  /** @type {(number | typeof GAP)[]} */
  const links = [];
  if (from > 1) links.push(1);
  if (from > 2) links.push(GAP);
  for (let p = from; p <= to; p++) links.push(p);
  if (to === pages - 2) links.push(pages - 1);
  else if (to < pages - 2) links.push(GAP);
  if (to < pages) links.push(pages);
  return links;
}
