/**
 * A failure whose message says what to do (NATS unreachable, a bad setting, a store made by another build): the CLI
 * prints the message alone, without a stack trace. Matched by class, never by `name`: main.ts need not load the module
 * that throws it (admin commands load no role's code).
 */
export class OperatorError extends Error {}
