export { clampPage, pageCount, paginate } from "./paginate.js";
export { GAP, pageLinks } from "./links.js";
