import { pino, type Logger } from 'pino';

export type { Logger };

/** One root logger per process; every module takes `log.child({ module })`. */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    destination ?? pino.destination({ fd: 2, sync: true }),
  );
}
