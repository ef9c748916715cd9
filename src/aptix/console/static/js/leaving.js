// Edits not yet saved: a page says what it would lose, and leaving it asks first (app.js asks
// on a link, Back or Forward, a sign-out, and the browser on a reload or a closed tab).

const LEAVE = "This page has edits that are not saved. Leave it and lose them?";

// [element, unsaved()]: a guard lasts as long as its element is in the page.
const guards = new Set();

/** While `el` is in the page, `unsaved()` says whether it holds edits not yet saved. */
export function guardEdits(el, unsaved) {
  guards.add([el, unsaved]);
}

/** Whether a page shown now holds edits not yet saved. */
export function unsavedEdits() {
  for (const guard of [...guards]) {
    const [el, unsaved] = guard;
    if (!el.isConnected) guards.delete(guard);
    else if (unsaved()) return true;
  }
  return false;
}

/** Whether the page may be left: nothing unsaved, or the person confirms losing it. */
export function mayLeave() {
  if (!unsavedEdits()) return true;
  if (!confirm(LEAVE)) return false;
  guards.clear(); // asked once: the navigation that follows does not ask again
  return true;
}
