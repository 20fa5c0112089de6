// The HTTP adapter's vocabulary. Handlers see only these types, never an engine's own objects, so the same
// handler runs on uWebSockets.js and on node:http.

import type { Result } from '../result.js';

export type BodyResult = Result<Buffer, 'too_large' | 'aborted'>;

/**
 * A body over the cap is read to its end and dropped, up to this many times the listener's cap, before the 413 is
 * sent: a client that is still writing when the server closes gets a reset (EPIPE) in place of the answer, and
 * retries what it should not. Past it the connection is cut (docs/errors.md "Bodies over the cap").
 */
export const drainFactor = 8;

/** What an engine hands to the dispatcher: everything read synchronously from the native request. */
export interface RawRequest {
  method: string;
  path: string;
  search: string;
  headers: Map<string, string>;
  remoteAddress: string;
  readBody(maxBytes: number): Promise<BodyResult>;
  isAborted(): boolean;
}

export interface HttpRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly params: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
  readonly requestId: string;
  header(lowerCaseName: string): string | undefined;
  /** The body, at most the listener's cap; too_large means it was dropped (drained up to `drainFactor` caps). */
  body(): Promise<BodyResult>;
  isAborted(): boolean;
}

/** A reply body streamed from a file of known size (engines send it with Content-Length). */
export class FileBody {
  constructor(
    readonly path: string,
    readonly size: number,
  ) {}
}

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  /** Serialized as JSON unless it is a string, a Buffer or a FileBody. */
  body?: unknown;
  /** Close the connection after answering (the request body was not read to the end). */
  close?: boolean;
}

/** What engines write: a finished reply with a byte body, or a file to stream. */
export interface WireReply {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer | string | FileBody;
  close: boolean;
}

export type Handler = (req: HttpRequest) => HttpReply | Promise<HttpReply>;

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** `/v1/api-keys/{id}`: literal segments and `{name}` parameters. */
  path: string;
  handler: Handler;
}

export type EngineName = 'uws' | 'node';

/** An open WebSocket as handlers see it, on either engine. */
export interface WsSocket {
  /** Send a text frame; false when the socket is closed or its buffer is full (the frame is dropped). */
  send(text: string): boolean;
  close(code: number, reason: string): void;
}

/** What an accepted upgrade runs: told when the socket opens and when it closes, from either side. */
export interface WsSession {
  /** The subprotocol to answer in Sec-WebSocket-Protocol, if any. */
  protocol: string | null;
  opened(socket: WsSocket): void;
  closed(): void;
}

export type UpgradeResult = Result<WsSession, HttpReply>;

export interface WsRoute {
  path: string;
  upgrade(req: HttpRequest): Promise<UpgradeResult>;
}

/** What an engine hands an upgrade request to. */
export type UpgradeDispatch = (
  raw: RawRequest,
) => Promise<Result<{ session: WsSession; requestId: string }, WireReply>>;

export interface Engine {
  readonly name: EngineName;
  /** Whether it serves WebSocket upgrades (node:http through `ws`; see selectEngine for why not uWS). */
  readonly websockets: boolean;
  /**
   * `bodyCap`: no request body is buffered past this many bytes, whether or not a handler asks for it. `upgrade`:
   * WebSocket upgrades; without it they are answered as ordinary requests.
   */
  listen(
    host: string,
    port: number,
    bodyCap: number,
    dispatch: (raw: RawRequest) => Promise<WireReply>,
    upgrade?: UpgradeDispatch,
  ): Promise<EngineServer>;
}

export interface EngineServer {
  readonly port: number;
  /** Accept no new connections; requests under way go on. */
  stopAccepting(): void;
  /** Close every connection. */
  close(): Promise<void>;
}
