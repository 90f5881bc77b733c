/**
 * Splitting a list into pages. Pages are numbered from 1.
 */

/**
 * @template T
 * @typedef {object} Page
 * @property {T[]} items the items of this page
 * @property {number} page this page's number (1-based, clamped into range)
 * @property {number} pages how many pages there are (at least 1)
 * @property {boolean} hasPrevious
 * @property {boolean} hasNext
 */

/**
 * Throws unless `n` is a whole number of at least `min`.
 * @param {string} name
 * @param {number} n
 * @param {number} min
 */
function checkWhole(name, n, min) {
  if (!Number.isInteger(n) || n < min) {
    throw new RangeError(`${name} must be a whole number of at least ${min}, got ${n}`);
  }
}

/**
 * How many pages `total` items fill; an empty list still has one (empty) page.
 * @param {number} total
 * @param {number} perPage
 * @returns {number}
 */
export function pageCount(total, perPage) {
  checkWhole("total", total, 0);
  checkWhole("perPage", perPage, 1);
  return Math.max(1, Math.ceil(total / perPage));
}

/**
 * `page` moved into 1..pages.
 * @param {number} page
 * @param {number} pages
 * @returns {number}
 */
export function clampPage(page, pages) {
  checkWhole("pages", pages, 1);
  if (!Number.isInteger(page)) throw new RangeError(`page must be a whole number, got ${page}`);
  return Math.min(Math.max(page, 1), pages);
}

/**
 * One page of `items`.
 * @template T
 * @param {readonly T[]} items
 * @param {number} page 1-based; out-of-range pages are clamped
 * @param {number} [perPage]
 * @returns {Page<T>}
 */
export function paginate(items, page, perPage = 20) {
  const pages = pageCount(items.length, perPage);
  const current = clampPage(page, pages);
  const start = (current - 1) * perPage;
  return {
    items: items.slice(start, start + perPage),
    page: current,
    pages,
    hasPrevious: current > 1,
    hasNext: current < pages,
  };
}
