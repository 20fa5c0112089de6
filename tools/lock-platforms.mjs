#!/usr/bin/env node
// Adds to package-lock.json the platform builds that the registry this project is developed against does not
// carry (darwin and linux-arm64 builds of chdb's engine), so that `npm ci` accepts the lock file everywhere.
//
// npm records an optional platform package only if it can fetch its metadata; when it cannot, the lock file names
// the package as a dependency but has no entry for it, and `npm ci` refuses the lock file as out of sync. The
// entries added here carry the version, os, cpu and libc the package declares upstream; npm skips them on other
// platforms, and on their own platform fetches them from whatever registry is configured.
//
// Run after any `npm install` that rewrites package-lock.json: `npm run lock:platforms`.
import { readFileSync, writeFileSync } from 'node:fs';

const lockPath = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(lockPath, 'utf8'));

/** Platform packages, by the package that names them: os, cpu and libc for each. */
const platforms = {
  'node_modules/chdb': {
    '@chdb/lib-darwin-arm64': { os: ['darwin'], cpu: ['arm64'] },
    '@chdb/lib-darwin-x64': { os: ['darwin'], cpu: ['x64'] },
    '@chdb/lib-linux-arm64-gnu': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'] },
    '@chdb/lib-linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'] },
  },
};

let added = 0;
for (const [parent, packages] of Object.entries(platforms)) {
  const owner = lock.packages[parent];
  if (!owner) continue;
  for (const [name, target] of Object.entries(packages)) {
    const version = owner.optionalDependencies?.[name];
    const key = `node_modules/${name}`;
    if (!version || lock.packages[key]) continue;
    lock.packages[key] = { version, ...target, license: owner.license, optional: true };
    added++;
  }
}
// Keep the keys sorted as npm writes them, so the next `npm install` produces no spurious diff.
const [rootKey, ...rest] = Object.keys(lock.packages);
lock.packages = Object.fromEntries([rootKey, ...rest.sort()].map((k) => [k, lock.packages[k]]));
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-platforms: ${added} entr${added === 1 ? 'y' : 'ies'} added`);
