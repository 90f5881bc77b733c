/** Text for the model (`@loopsmith/shared/text`): the one head-and-tail cut of output, one-shot and streaming. */
export {
  CUT_NOTE_PATTERN,
  CutStream,
  cutBytes,
  cutNote,
  cutText,
  cutUtf8,
  findCutNote,
  type CutOptions,
  type CutUnit,
} from "./cut.js";
