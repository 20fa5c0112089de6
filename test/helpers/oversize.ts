import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// How a client sees an upload over a body cap: issue 60's 1.1 MB batch got EPIPE (the server closed while the client
// was still writing) instead of its 413, which a reporter takes for a failure to retry. The client runs in a process
// of its own, as a reporter does: sharing the server's event loop, its writes wait for the server's turns and the
// race is never seen (the old engines passed in-process and failed 20 of 20 across processes).

/** One POST by node:http, on a connection kept alive (`agent`) or closed after it: "status code", or how it failed. */
function postOnce(url: URL, body: Buffer, headers: Record<string, string>, agent: Agent | false): Promise<string> {
  return new Promise((resolve) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': String(body.length) } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve(`${res.statusCode} ${errorCode(Buffer.concat(parts).toString())}`));
        res.on('error', (err) => resolve(`failed: ${err.message}`));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve(`failed: ${err.code ?? err.message}`));
    req.end(body);
  });
}

function errorCode(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { code?: string }; errors?: Array<{ code?: string }> };
    return body.error?.code ?? body.errors?.[0]?.code ?? text.slice(0, 80);
  } catch {
    return text.slice(0, 80);
  }
}

export interface Outcomes {
  fetch: string[];
  keepAlive: string[];
  closed: string[];
}

/** What `rounds` uploads of `body` got by fetch, by node:http with keep-alive, and without (in another process). */
export function oversizeOutcomes(
  url: string,
  body: Buffer,
  headers: Record<string, string> = {},
  rounds = 3,
): Promise<Outcomes> {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-oversize-'));
  const file = join(dir, 'body');
  writeFileSync(file, body);
  const self = fileURLToPath(import.meta.url);
  return new Promise<Outcomes>((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import=tsx', self, url, file, JSON.stringify(headers), String(rounds)],
      { maxBuffer: 1024 * 1024 },
      (err, stdout) => {
        rmSync(dir, { recursive: true, force: true });
        if (err) reject(new Error(`the upload client failed: ${err.message}`));
        else resolve(JSON.parse(stdout) as Outcomes);
      },
    );
  });
}

/** Each outcome once, as seen by this process. */
async function uploads(url: string, body: Buffer, headers: Record<string, string>, rounds: number): Promise<Outcomes> {
  const byFetch: string[] = [];
  const keepAlive: string[] = [];
  const closed: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < rounds; i++) {
    byFetch.push(
      await fetch(url, { method: 'POST', headers, body })
        .then(async (r) => `${r.status} ${errorCode(await r.text())}`)
        .catch((err: Error) => `failed: ${(err.cause as Error | undefined)?.message ?? err.message}`),
    );
    keepAlive.push(await postOnce(new URL(url), body, headers, agent));
    closed.push(await postOnce(new URL(url), body, headers, false));
  }
  agent.destroy();
  const once = (xs: string[]): string[] => [...new Set(xs)];
  return { fetch: once(byFetch), keepAlive: once(keepAlive), closed: once(closed) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [url, file, headers, rounds] = process.argv.slice(2) as [string, string, string, string];
  void uploads(url, readFileSync(file), JSON.parse(headers) as Record<string, string>, Number(rounds)).then((r) =>
    process.stdout.write(JSON.stringify(r)),
  );
}
