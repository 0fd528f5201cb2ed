// The operators' CLI over the admin API (docs/decisions.md#accounts-and-keys); the commands and
// options are listed in USAGE below. Against the local stack it needs nothing: the admin URL
// comes from <data>/stack.json and the token from <data>/admin-token (data = TAMP_DATA_DIR or
// .data); TAMP_ADMIN_URL and ADMIN_TOKEN override both.
// Exit codes: 0 ok, 1 the API refused or failed, 2 usage errors.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { callAdminApi, publicBaseUrl } from './admin-api';

const USAGE = `usage: npm run --silent admin -- <command>
  account create [--plan free|pro] [--credits N] [--webhook-url URL]
                 [--billing-cycle-anchor ISO] [--json]
  account update <accountId> [--plan free|pro] [--webhook-url URL | --no-webhook-url]
                 [--billing-cycle-anchor ISO | --no-billing-cycle-anchor] [--json]
  account show <accountId> [--json]
  account rotate-webhook-secret <accountId> [--grace-period-seconds N] [--json]
  account sign-in-link <accountId> [--json]
  account revoke-sessions <accountId> [--json]
  credits add <accountId> <N> [--json]
  key create <accountId> [--json]
  key revoke <keyId> [--json]
  key list <accountId> [--json]
  deliveries <jobId> [--json]
  redeliver <jobId> [--event job.completed|job.failed] [--json]
--billing-cycle-anchor: an ISO-8601 instant, not in the future (e.g. 2025-01-15T00:00:00Z);
  periods are then 30-day cycles from it instead of calendar months.
rotate-webhook-secret: the previous secret keeps signing for --grace-period-seconds
  (default: billing's WEBHOOK_SECRET_GRACE_MS, 24 h; 0 retires it at once).
sign-in-link: a one-time link into the account dashboard (valid for billing's
  SIGN_IN_LINK_TTL_MS, 15 min), for the customer; it is shown once.
environment: TAMP_ADMIN_URL, ADMIN_TOKEN, TAMP_PUBLIC_URL (for links), TAMP_DATA_DIR (default .data)`;

/** A command line the CLI refuses: exit code 2, with the usage. */
class UsageError extends Error {}

/** What a command prints: `json` with --json, else `text`. */
type Output = { json: unknown; text: string };

const integer =
  (name: string, allowZero = false) =>
  (value: string): number => {
    const number = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(number) || (!allowZero && number === 0)) {
      throw new InvalidArgumentError(
        `${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer`,
      );
    }
    return number;
  };

function webhookUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return value;
  } catch {}
  throw new InvalidArgumentError('--webhook-url must be an absolute http(s) URL');
}

const planOption = () => new Option('--plan <plan>').choices(['free', 'pro']);
const enc = encodeURIComponent;

/**
 * `--<name> <value>` and `--no-<name>` on one command: the value, null when cleared, undefined
 * when neither is given. commander keeps only the last of the two, so which were given is
 * tracked here: both at once is a usage error.
 */
function clearable(command: Command, name: string, parse?: (value: string) => string) {
  const given = new Set<string>();
  const valueOption = new Option(`--${name} <value>`);
  command.addOption(parse === undefined ? valueOption : valueOption.argParser(parse));
  command.addOption(new Option(`--no-${name}`));
  command.on(`option:${name}`, () => given.add(name));
  command.on(`option:no-${name}`, () => given.add(`no-${name}`));
  return (value: string | false | undefined): string | null | undefined => {
    if (given.size > 1) throw new UsageError(`use either --${name} or --no-${name}`);
    return value === false ? null : value;
  };
}

function adminProgram(print: (output: Output) => void): Command {
  const program = new Command('admin')
    .exitOverride()
    .configureOutput({ writeErr: () => {}, outputError: () => {} })
    .configureHelp({ formatHelp: () => `${USAGE}\n` });
  // Every command takes --json; the action's answer is printed by print().
  const leaf = (parent: Command, name: string) =>
    parent.command(name).option('--json', 'print JSON instead of text');
  const answer =
    <Args extends unknown[]>(run: (...args: Args) => Promise<Output>) =>
    async (...args: Args) =>
      print(await run(...args));
  // A command on one account, key or job id and nothing else.
  const onId = (parent: Command, name: string, id: string, run: (id: string) => Promise<Output>) =>
    leaf(parent, name).argument(`<${id}>`).action(answer(run));

  const account = program.command('account');
  leaf(account, 'create')
    .addOption(planOption().default('free'))
    .option('--credits <N>', 'starting credits', integer('--credits', true))
    .option('--webhook-url <URL>', 'webhook target', webhookUrl)
    .option('--billing-cycle-anchor <ISO>', '30-day cycles from this instant')
    .action(
      answer(async (options) => {
        const data = await callAdminApi<{
          accountId: string;
          apiKey: string;
          webhookSecret: string;
        }>('POST', '/accounts', {
          plan: options.plan,
          ...(options.credits !== undefined && { credits: options.credits }),
          ...(options.webhookUrl !== undefined && { webhookUrl: options.webhookUrl }),
          // Validated by the API (format, and not in the future): one rule, in one place.
          ...(options.billingCycleAnchor !== undefined && {
            billingCycleAnchor: options.billingCycleAnchor,
          }),
        });
        const result = {
          accountId: data.accountId,
          apiKey: data.apiKey,
          webhookSecret: data.webhookSecret,
        };
        return {
          json: result,
          text: `account ${result.accountId}\napi key ${result.apiKey}\nwebhook secret ${result.webhookSecret}\n(the API key is shown once)`,
        };
      }),
    );

  const update = leaf(account, 'update').argument('<accountId>').addOption(planOption());
  const webhookUrlOf = clearable(update, 'webhook-url', webhookUrl);
  const anchorOf = clearable(update, 'billing-cycle-anchor');
  update.action(
    answer(async (accountId: string, options) => {
      const newWebhookUrl = webhookUrlOf(options.webhookUrl);
      const newAnchor = anchorOf(options.billingCycleAnchor);
      const body = {
        ...(options.plan !== undefined && { plan: options.plan }),
        ...(newWebhookUrl !== undefined && { webhookUrl: newWebhookUrl }),
        ...(newAnchor !== undefined && { billingCycleAnchor: newAnchor }),
      };
      if (Object.keys(body).length === 0) {
        throw new UsageError(
          'nothing to update: give --plan, --webhook-url, --no-webhook-url, --billing-cycle-anchor or --no-billing-cycle-anchor',
        );
      }
      const data = await callAdminApi<{
        accountId: string;
        plan: string;
        webhookUrl: string | null;
        billingCycleAnchor: string | null;
      }>('PATCH', `/accounts/${enc(accountId)}`, body);
      const cycle =
        data.billingCycleAnchor === null ? '' : `, 30-day cycles from ${data.billingCycleAnchor}`;
      return {
        json: data,
        text: `account ${data.accountId}: plan ${data.plan}, webhook ${data.webhookUrl ?? '(none)'}${cycle}`,
      };
    }),
  );

  onId(account, 'show', 'accountId', async (accountId) => {
    const data = await callAdminApi('GET', `/accounts/${enc(accountId)}`);
    return { json: data, text: JSON.stringify(data, null, 2) };
  });

  leaf(account, 'rotate-webhook-secret')
    .argument('<accountId>')
    .option(
      '--grace-period-seconds <N>',
      'how long the previous secret keeps signing',
      integer('--grace-period-seconds', true),
    )
    .action(
      answer(async (accountId: string, options) => {
        const data = await callAdminApi<{ webhookSecret: string; previousValidUntil: string }>(
          'POST',
          `/accounts/${enc(accountId)}/webhook-secret/rotate`,
          options.gracePeriodSeconds === undefined
            ? {}
            : { gracePeriodSeconds: options.gracePeriodSeconds },
        );
        const result = {
          webhookSecret: data.webhookSecret,
          previousValidUntil: data.previousValidUntil,
        };
        return {
          json: result,
          text: `webhook secret ${result.webhookSecret}\n(the previous secret also signs deliveries until ${result.previousValidUntil})`,
        };
      }),
    );

  onId(account, 'sign-in-link', 'accountId', async (accountId) => {
    const data = await callAdminApi<{ path: string; expiresAt: string }>(
      'POST',
      `/accounts/${enc(accountId)}/sign-in-links`,
    );
    const url = `${publicBaseUrl() ?? ''}${data.path}`;
    return {
      json: { url, expiresAt: data.expiresAt },
      text: `${url}\n(one-time sign-in link, valid until ${data.expiresAt})`,
    };
  });

  onId(account, 'revoke-sessions', 'accountId', async (accountId) => {
    const data = await callAdminApi<{ revoked: number }>(
      'POST',
      `/accounts/${enc(accountId)}/sessions/revoke`,
    );
    return { json: data, text: `${data.revoked} dashboard sessions ended` };
  });

  leaf(program.command('credits'), 'add')
    .argument('<accountId>')
    .argument('<N>', 'credits to grant', integer('N'))
    .action(
      answer(async (accountId: string, credits: number) => {
        const data = await callAdminApi<{ accountId: string; grantedCredits: number }>(
          'POST',
          `/accounts/${enc(accountId)}/credits`,
          { credits },
        );
        return {
          json: data,
          text: `account ${data.accountId}: ${data.grantedCredits} granted credits`,
        };
      }),
    );

  const key = program.command('key');
  onId(key, 'create', 'accountId', async (accountId) => {
    const data = await callAdminApi<{ keyId: string; apiKey: string }>(
      'POST',
      `/accounts/${enc(accountId)}/keys`,
    );
    const result = { keyId: data.keyId, apiKey: data.apiKey };
    return { json: result, text: `key ${result.keyId}\napi key ${result.apiKey}\n(shown once)` };
  });
  onId(key, 'revoke', 'keyId', async (keyId) => {
    const data = await callAdminApi<{ keyId: string; revokedAt: string | null }>(
      'DELETE',
      `/keys/${enc(keyId)}`,
    );
    return { json: data, text: `key ${data.keyId} revoked at ${data.revokedAt}` };
  });
  onId(key, 'list', 'accountId', async (accountId) => {
    const data = await callAdminApi<{
      keys: { keyId: string; displayPrefix: string; createdAt: string; revokedAt: string | null }[];
    }>('GET', `/accounts/${enc(accountId)}/keys`);
    const lines = data.keys.map(
      (key) =>
        `${key.keyId}  ${key.displayPrefix}…  created ${key.createdAt}  ${key.revokedAt === null ? 'active' : `revoked ${key.revokedAt}`}`,
    );
    return { json: data, text: lines.length === 0 ? '(no keys)' : lines.join('\n') };
  });

  onId(program, 'deliveries', 'jobId', async (jobId) => {
    const data = await callAdminApi<{
      deliveries: {
        attempt: number;
        event: string;
        attemptedAt: string;
        target: string;
        statusCode: number | null;
        outcome: string;
        error: string | null;
      }[];
    }>('GET', `/jobs/${enc(jobId)}/deliveries`);
    const lines = data.deliveries.map(
      (delivery) =>
        `#${delivery.attempt} ${delivery.event} ${delivery.attemptedAt} ${delivery.target} → ${delivery.outcome}${delivery.statusCode === null ? '' : ` ${delivery.statusCode}`}${delivery.error === null ? '' : ` (${delivery.error})`}`,
    );
    return { json: data, text: lines.length === 0 ? '(no deliveries)' : lines.join('\n') };
  });

  leaf(program, 'redeliver')
    .argument('<jobId>')
    .addOption(new Option('--event <event>').choices(['job.completed', 'job.failed']))
    .action(
      answer(async (jobId: string, options) => {
        const data = await callAdminApi<{ scheduled: boolean }>(
          'POST',
          `/jobs/${enc(jobId)}/redeliver`,
          options.event === undefined ? {} : { event: options.event },
        );
        return {
          json: data,
          text: data.scheduled ? `redelivery of ${jobId} scheduled` : 'nothing to redeliver',
        };
      }),
    );
  return program;
}

/** Runs the command line; the process's exit code. */
async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const print = (output: Output) =>
    process.stdout.write(
      `${json && output.json !== undefined ? JSON.stringify(output.json) : output.text}\n`,
    );
  try {
    await adminProgram(print).parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError && error.code === 'commander.helpDisplayed') return 0;
    if (error instanceof UsageError || error instanceof CommanderError) {
      const message =
        error instanceof CommanderError && error.code === 'commander.help'
          ? 'missing command'
          : error.message.replace(/^error: /, '');
      process.stderr.write(`error: ${message}\n${USAGE}\n`);
      return 2;
    }
    // AdminApiError or anything unexpected: the message, never a stack.
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`error: ${message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
