import type { WireEvent } from '../bus/wire.js';

// Requests on `historySubject` (core NATS request and reply, a queue group of the flush role): an aggregator asks for
// sessions' stored events (src/aggregate/recall.ts), a flush process answers from the store, page by page
// (src/flush/history-service.ts). JSON both ways.

/** Which sessions' stored events an aggregator asks for (docs/aggregation.md "Late events"). */
export interface HistoryRequest {
  tenant: string;
  sessions: string[];
  /** Events the shard read before its input message of this sequence... */
  before_seq: number;
  /**
   * ...or received before this time (Unix ms): events of an events stream made again (its sequences restart at 1)
   * are older than any session still in memory.
   */
  received_before: number;
  /**
   * The raw-stream sequence the store must have written through before it answers: an output of the shard that
   * covers every session it let go of (0: none needed). The flush role's consumer of the raw stream says how far the
   * store is; until it is that far, the answer is an error and the shard asks again.
   */
  stored_through: number;
  /** Rows to skip: the events of earlier answers to the same request. */
  offset: number;
}

/** One page of an answer: events from the request's offset, and where the next page starts (null: no more). */
export type HistoryAnswer = { events: WireEvent[]; next: number | null } | { error: string };
