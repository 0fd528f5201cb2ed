import type { Logger } from 'pino';

type ShutdownStep = { name: string; run: () => Promise<void> | void };

/**
 * Ordered graceful shutdown. Steps run in reverse registration order (last opened, first
 * closed): stop intake, drain in-flight work, then close connections.
 */
export class Shutdown {
  private readonly steps: ShutdownStep[] = [];
  private running: Promise<void> | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  register(name: string, run: () => Promise<void> | void): void {
    this.steps.push({ name, run });
  }

  get started(): boolean {
    return this.running !== undefined;
  }

  /** Runs every step once, even if called again or if a step fails. */
  run(reason: string): Promise<void> {
    this.running ??= this.runSteps(reason);
    return this.running;
  }

  installSignalHandlers(onDone: (exitCode: number) => void = (code) => process.exit(code)): void {
    const handle = (signal: NodeJS.Signals) => {
      if (this.started) return;
      const deadline = setTimeout(() => {
        this.logger.error({ signal }, 'shutdown timed out; exiting');
        onDone(1);
      }, this.timeoutMs);
      deadline.unref();
      void this.run(signal).then(() => onDone(0));
    };
    process.once('SIGTERM', handle);
    process.once('SIGINT', handle);
  }

  private async runSteps(reason: string): Promise<void> {
    this.logger.info({ reason }, 'shutting down');
    for (const step of [...this.steps].reverse()) {
      try {
        await step.run();
        this.logger.debug({ step: step.name }, 'shutdown step done');
      } catch (error) {
        this.logger.error({ err: error, step: step.name }, 'shutdown step failed');
      }
    }
    this.logger.info('stopped');
  }
}
