// Which turn of a session a request of this tab started, once its stream was cut short.
// Another tab (or client) may have added turns since this tab last read the session, so "the
// first turn after the last one read" may be theirs: deciding from it would show their
// ending as this tab's and could send an instruction again after its own calls ran.

/** Blank by the server's measure (aptix.blank): it stores an instruction without them around. */
const BLANK = /^[\s\x1c-\x1f\x85]+|[\s\x1c-\x1f\x85]+$/g;

/** Said where the turn an instruction started cannot be told from another tab's. */
export const CANNOT_TELL =
  "Your message was not sent again: this tab cannot tell which turn on record is its own, and " +
  "the tool calls of that turn may have taken effect. Open the session again to see how it " +
  "ended; send it yourself only if it should run again.";

/**
 * A request of this tab: the seq of the last turn the tab had read when it was sent, and the
 * id of its turn once the stream's answer named it (X-Aptix-Turn, before any event).
 */
export function ownRequest(knownSeq) {
  return { knownSeq, turnId: null };
}

/**
 * The turn `own` started in `session` (read after it): {turn}, null when the request started
 * none; or {turn: null, unsure} when the record cannot tell, `unsure` holding the turns that
 * may be it. Named by id when the answer gave one; else (the connection was lost before the
 * answer began) a turn after the last one read with the same instruction may be it, and
 * turns not read (only the newest page is) may hold it.
 */
export function ownTurn(session, own, instruction) {
  if (own.turnId) {
    const turn = session.turns.find((t) => t.turnId === own.turnId);
    return turn ? { turn } : { turn: null, unsure: [] };
  }
  const sent = (instruction || "").replace(BLANK, "");
  const unsure = session.turns.filter((t) => t.seq > own.knownSeq && t.instruction === sent);
  const first = session.turns[0];
  const unread = session.turnsNextBefore != null && (!first || first.seq > own.knownSeq + 1);
  return unsure.length > 0 || unread ? { turn: null, unsure } : { turn: null };
}
