// The dashboard: a Preact app built into dist/dashboard, which the api role serves at `{base_url}/`
// (src/api/dashboard.ts). `npm run build` runs this after tsc.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // Budgets are checked by test/http/dashboard.test.ts on the gzipped output, not by Vite's warning.
    chunkSizeWarningLimit: 1024,
  },
});
