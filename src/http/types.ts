// The HTTP adapter's vocabulary. Handlers see only these types, never an engine's own objects, so the same
// handler runs on uWebSockets.js and on node:http.

export type BodyResult = { ok: true; bytes: Buffer } | { ok: false; reason: 'too_large' | 'aborted' };

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
  /** The body, at most the listener's cap; too_large means it was not read to the end. */
  body(): Promise<BodyResult>;
  isAborted(): boolean;
}

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  /** Serialized as JSON unless it is a string or Buffer. */
  body?: unknown;
  /** Close the connection after answering (the request body was not read to the end). */
  close?: boolean;
}

/** What engines write: a finished reply with a byte body. */
export interface WireReply {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer | string;
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

export interface Engine {
  readonly name: EngineName;
  /** `bodyCap`: no request body is buffered past this many bytes, whether or not a handler asks for it. */
  listen(host: string, port: number, bodyCap: number, dispatch: (raw: RawRequest) => Promise<WireReply>): Promise<EngineServer>;
}

export interface EngineServer {
  readonly port: number;
  /** Accept no new connections; requests under way go on. */
  stopAccepting(): void;
  /** Close every connection. */
  close(): Promise<void>;
}
