/** Paired statistical tests (`@loopsmith/shared/stats`): the p-values the improver and `bench` decide by. */
export { clampP, signedRankTest, signTestP, type Alternative, type SignedRank } from "./paired.js";
