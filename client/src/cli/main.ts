import { JOB_STATUSES, JOB_TYPES, type Pipeline } from '@tamp/proto';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_BASE_URL, Tamp } from '../client';
import { TampTimeoutError } from '../errors';
import type { RetryEvent } from '../http';
import {
  jobsText,
  jobText,
  listJobs,
  operationsText,
  pipelineArgument,
  presetsText,
  show,
  usageText,
  webhookVerify,
} from './commands';
import { type CompressFlags, compressCommand } from './compress/command';
import { describeFailure, EXIT, EXIT_CODES_HELP, UsageError } from './failures';

declare const TAMP_CLIENT_VERSION: string | undefined;
const VERSION = typeof TAMP_CLIENT_VERSION === 'string' ? TAMP_CLIENT_VERSION : 'source';

interface GlobalFlags {
  apiKey?: string;
  baseUrl?: string;
}

const ENVIRONMENT_HELP = `Environment:
  TAMP_API_KEY         API key (sk_live_…); --api-key overrides it
  TAMP_BASE_URL        API address; default ${DEFAULT_BASE_URL} (npm start)
  TAMP_WEBHOOK_SECRET  signing secret for tamp webhook verify (whsec_…)`;

function integer(name: string, min: number, max: number) {
  return (value: string) => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`${name} must be a whole number from ${min} to ${max}`);
    }
    return parsed;
  };
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function buildProgram(setExitCode: (code: number) => void): Command {
  const program = new Command('tamp');
  // Before any subcommand exists, so that they all inherit it: parse errors are thrown, not exits.
  program.exitOverride();
  const globals = () => program.opts<GlobalFlags>();
  const connect = (onRetry?: (event: RetryEvent) => void) => {
    const { apiKey, baseUrl } = globals();
    const key = apiKey ?? process.env.TAMP_API_KEY;
    if (key === undefined || key === '') {
      throw new UsageError('no API key: set TAMP_API_KEY (or pass --api-key)');
    }
    return new Tamp({
      apiKey: key,
      baseUrl: baseUrl ?? process.env.TAMP_BASE_URL ?? DEFAULT_BASE_URL,
      ...(onRetry !== undefined && { onRetry }),
    });
  };
  const run =
    <Args extends unknown[]>(action: (...args: Args) => Promise<number>) =>
    async (...args: Args) => {
      setExitCode(await action(...args));
    };
  /**
   * The action of a command that reads one thing from the API and shows it (see `show`).
   * Commander calls it with the command's argument when it has one, its flags, then itself;
   * `read` and `render` get that argument, or the flags when there is none.
   */
  const reads =
    <Argument, Answer>(
      read: (tamp: Tamp, argument: Argument) => Promise<Answer>,
      render: (answer: Answer, argument: Argument) => string,
    ) =>
    async (...parameters: unknown[]) => {
      const flags = parameters.at(-2) as { json: boolean };
      const argument = (parameters.length > 2 ? parameters[0] : flags) as Argument;
      const answer = await read(connect(), argument);
      setExitCode(show(answer, flags.json, (shown) => render(shown, argument)));
    };

  program
    .description('Compress audio, images and text with Tamp.')
    .version(VERSION)
    .option('--api-key <key>', 'API key (default: $TAMP_API_KEY)')
    .option('--base-url <url>', `API address (default: $TAMP_BASE_URL or ${DEFAULT_BASE_URL})`)
    .showHelpAfterError('(tamp --help lists the commands)')
    .addHelpText('after', `\n${ENVIRONMENT_HELP}\n\n${EXIT_CODES_HELP}`);

  program
    .command('compress')
    .description(
      'Compress files, folders (recursively) and globs into --out, resuming where an earlier run stopped',
    )
    .argument('<inputs...>', 'files, folders or globs (.mp3 .wav .jpg .jpeg .png .webp .pdf .txt)')
    .option(
      '-p, --preset <name>',
      'preset for every pipeline (medium, chill, aggressive…), or PIPELINE=NAME for one; repeatable (default medium)',
      collect,
      [],
    )
    .option(
      '--ops <json>',
      'operations as JSON: an array, or {"image":[…],"audio":[…]}; @file.json reads a file',
    )
    .option('-o, --out <dir>', 'output folder (also holds the resume state)', 'compressed')
    .option('-c, --concurrency <n>', 'files in flight at once', integer('--concurrency', 1, 32), 4)
    .option('--force', 'compress again files that earlier runs finished', false)
    .option('--json', 'print one JSON document with every file and the totals', false)
    .option('--no-progress', 'plain lines even on a terminal')
    .addHelpText(
      'after',
      `
Examples:
  tamp compress photo.jpg --preset medium
  tamp compress ./media --out ./small --concurrency 8
  tamp compress 'talks/**/*.wav' --preset audio=podcast
  tamp compress scans --ops '[{"type":"resize","params":{"width":1200}},{"type":"encode","params":{"format":"avif"}}]'

Running the same command again skips finished files and picks up unfinished ones
(state in <out>/.tamp-state.json, keyed by file content and processing choice):
nothing is uploaded, created or charged twice.`,
    )
    .action(
      run((inputs: string[], flags: CompressFlags) => compressCommand(inputs, flags, connect)),
    );

  const jobs = program.command('jobs').description('List, read and wait for jobs');
  jobs
    .command('list')
    .description("the account's jobs, newest first")
    .addOption(new Option('--type <type>', 'only this type').choices(JOB_TYPES))
    .addOption(new Option('--status <status>', 'only this status').choices(JOB_STATUSES))
    .option('-n, --limit <n>', 'how many', integer('--limit', 1, 10_000), 20)
    .option('--json', 'JSON output', false)
    .action(reads(listJobs, jobsText));
  jobs
    .command('get')
    .description('one job, with a fresh output link')
    .argument('<id>', 'job id (job_…)')
    .option('--json', 'JSON output', false)
    .action(reads((tamp, id: string) => tamp.getJob(id), jobText));
  jobs
    .command('wait')
    .description('wait until a job is completed (exit 0) or failed (exit 1)')
    .argument('<id>', 'job id (job_…)')
    .option(
      '-t, --timeout <seconds>',
      'give up after (exit 6)',
      integer('--timeout', 1, 86_400),
      600,
    )
    .option('--json', 'JSON output', false)
    .action(
      run(async (id: string, flags: { timeout: number; json: boolean }) => {
        const job = await connect().waitForJob(id, { timeoutMs: flags.timeout * 1000 });
        show(job, flags.json, jobText);
        return job.status === 'completed' ? EXIT.ok : EXIT.failed;
      }),
    );

  program
    .command('usage')
    .description("this billing period's usage per pipeline")
    .option('--json', 'JSON output', false)
    .action(reads((tamp) => tamp.usage(), usageText));

  /** `tamp presets <pipeline>` and `tamp operations <pipeline>`: what the API publishes per pipeline. */
  const pipelineCatalogue = (name: string, description: string) =>
    program
      .command(name)
      .description(description)
      .argument('<pipeline>', 'audio, image or text', pipelineArgument)
      .option('--json', 'JSON output', false);
  pipelineCatalogue('presets', 'the presets of a pipeline and the operations they run').action(
    reads((tamp, pipeline: Pipeline) => tamp.presets(pipeline), presetsText),
  );
  pipelineCatalogue(
    'operations',
    'the operations of a pipeline, their parameters, ranges and defaults',
  ).action(reads((tamp, pipeline: Pipeline) => tamp.operations(pipeline), operationsText));

  program
    .command('webhook')
    .description('Webhook tools')
    .command('verify')
    .description(
      'verify a saved delivery: the raw HTTP request as received, or {"headers":{…},"body":"…"}',
    )
    .argument('<file>', 'the saved delivery; - reads standard input')
    .option(
      '-s, --secret <whsec>',
      'signing secret (default: $TAMP_WEBHOOK_SECRET); repeat for old and new during a rotation',
      collect,
      [],
    )
    .option(
      '--tolerance <seconds>',
      'accept a timestamp this far from now (a saved delivery is older than 300 s soon)',
      integer('--tolerance', 1, 10 * 365 * 86_400),
      300,
    )
    .option('--json', 'JSON output', false)
    .action(
      run((file: string, flags: { secret: string[]; tolerance: number; json: boolean }) =>
        webhookVerify(file, flags),
      ),
    );

  return program;
}

/** Runs the command line; resolves to the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = buildProgram((code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version are not errors; every other parse failure is a usage error.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    const baseUrl =
      program.opts<GlobalFlags>().baseUrl ?? process.env.TAMP_BASE_URL ?? DEFAULT_BASE_URL;
    const failure = describeFailure(error, baseUrl);
    process.stderr.write(`error: ${failure.message}\n`);
    if (failure.hint !== undefined) process.stderr.write(`hint: ${failure.hint}\n`);
    if (error instanceof TampTimeoutError)
      process.stderr.write(`last status: ${error.job.status}\n`);
    return failure.exitCode;
  }
}
