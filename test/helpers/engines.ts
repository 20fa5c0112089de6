import { loadUws } from '../../src/http/engines/uws.js';

// The HTTP engines a test can run on this machine. uWebSockets.js's builds for Node 22 and newer need glibc 2.38;
// where its pinned binary does not load, tests of the uWS engine are skipped with the reason, except in CI, whose
// Node 20 must load it (there they run, and fail with the reason if it does not).

const uws = loadUws();

/** A skip reason for uWS-only tests, or false to run them. */
export const uwsSkip: string | false =
  uws.ok || process.env.CI ? false : `uWebSockets.js does not load here: ${uws.error}`;

/** What HTTP_ENGINE=auto runs here: uWS where it loads, else node:http. */
export const autoEngine: 'uws' | 'node' = uws.ok ? 'uws' : 'node';

/** Options for a test of one engine: skipped for uWS where it does not load. */
export const engineTest = (engine: 'uws' | 'node'): { skip: string | false } => ({
  skip: engine === 'uws' ? uwsSkip : false,
});
