/** The CLI's terminal output helpers: aligned tables and colour that honours NO_COLOR and FORCE_COLOR. */
export { colourEnabled, palette, type ColourTarget, type Palette } from "./colour.js";
export { displayWidth, formatTable, padCell, type Align, type TableOptions } from "./table.js";
