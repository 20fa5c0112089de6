import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Write a secret to a new file only its owner reads (0600, in a 0700 directory). It fails when the file exists, so
 * two processes starting at once cannot both make one; chmod again in case a umask narrowed the mode.
 */
export function createPrivateFile(file: string, content: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, content, { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
}
