import { execFile as execFileCallback } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { RunningInfrastructure, ServerProcess } from '../infra/launcher';
import { toolPath } from '../infra/provision';

/**
 * What the local stack's servers count of the work done through them, read before and after a
 * measurement: MongoDB commands FerretDB answered (its Prometheus metrics), messages through
 * NATS (its monitoring endpoint's /varz), and PostgreSQL's table statistics (scans and rows,
 * through psql). The launcher exposes FerretDB's metrics URL; NATS' monitoring port and
 * PostgreSQL's port are read from the servers' own command lines.
 */

const execFile = promisify(execFileCallback);

type Servers = RunningInfrastructure['servers'];

/** Counters that are current the moment they are read. */
export interface MessageCounts {
  /** Every command FerretDB answered (`ferretdb_client_requests_total`, all commands). */
  mongoCommands: number;
  /** The same, by command name (`find`, `update`, `insert`, …). */
  mongoByCommand: Record<string, number>;
  /** Messages NATS received from clients and delivered to them (`in_msgs`, `out_msgs`). */
  natsIn: number;
  natsOut: number;
}

/** Sums of `pg_stat_user_tables` over every table of every database. */
export interface TableActivity {
  seqScans: number;
  seqRowsRead: number;
  indexScans: number;
  rowsInserted: number;
  rowsUpdated: number;
  rowsDeleted: number;
}

export async function readMessageCounts(servers: Servers): Promise<MessageCounts> {
  const [mongoByCommand, nats] = await Promise.all([
    ferretdbCommands(server(servers, 'ferretdb')),
    natsMessages(server(servers, 'nats')),
  ]);
  const mongoCommands = Object.values(mongoByCommand).reduce((sum, count) => sum + count, 0);
  return { mongoCommands, mongoByCommand, natsIn: nats.in_msgs, natsOut: nats.out_msgs };
}

export function messagesBetween(before: MessageCounts, after: MessageCounts): MessageCounts {
  const mongoByCommand: Record<string, number> = {};
  for (const [command, count] of Object.entries(after.mongoByCommand)) {
    const done = count - (before.mongoByCommand[command] ?? 0);
    if (done > 0) mongoByCommand[command] = done;
  }
  return {
    mongoCommands: after.mongoCommands - before.mongoCommands,
    mongoByCommand,
    natsIn: after.natsIn - before.natsIn,
    natsOut: after.natsOut - before.natsOut,
  };
}

/**
 * PostgreSQL's backends send their statistics to shared memory when they go idle, at most once
 * a second; what a busy backend could not send then follows after PGSTAT_IDLE_INTERVAL (10 s in
 * PostgreSQL 15), and nothing outside the backend can make it flush sooner
 * (pg_stat_force_next_flush() acts on the calling backend only). So statistics read right after
 * a measurement miss its last second: wait this long before reading them.
 */
const STATS_FLUSH_WAIT_MS = 10_500;

export async function waitForPostgresStats(): Promise<void> {
  await sleep(STATS_FLUSH_WAIT_MS);
}

export async function readTableActivity(servers: Servers): Promise<TableActivity> {
  const postgres = server(servers, 'postgres');
  const databases = await postgresDatabases(postgres);
  const perDatabase = await Promise.all(
    databases.map(async (database) => {
      const [row] = await queryPostgres(
        postgres,
        database,
        `SELECT ${TABLE_ACTIVITY_COLUMNS.map((column) => `coalesce(sum(${column}), 0)`).join(', ')}
           FROM pg_stat_user_tables`,
      );
      return (row ?? []).map(Number);
    }),
  );
  const total = (index: number) => perDatabase.reduce((sum, row) => sum + (row[index] ?? 0), 0);
  return {
    seqScans: total(0),
    seqRowsRead: total(1),
    indexScans: total(2),
    rowsInserted: total(3),
    rowsUpdated: total(4),
    rowsDeleted: total(5),
  };
}

/** The pg_stat_user_tables columns behind TableActivity, in its order. */
const TABLE_ACTIVITY_COLUMNS = [
  'seq_scan',
  'seq_tup_read',
  'idx_scan',
  'n_tup_ins',
  'n_tup_upd',
  'n_tup_del',
] as const;

export function activityBetween(before: TableActivity, after: TableActivity): TableActivity {
  return {
    seqScans: after.seqScans - before.seqScans,
    seqRowsRead: after.seqRowsRead - before.seqRowsRead,
    indexScans: after.indexScans - before.indexScans,
    rowsInserted: after.rowsInserted - before.rowsInserted,
    rowsUpdated: after.rowsUpdated - before.rowsUpdated,
    rowsDeleted: after.rowsDeleted - before.rowsDeleted,
  };
}

/**
 * VACUUM ANALYZE of every database: after a bulk load, so the tables have fresh planner
 * statistics and autovacuum has nothing left to catch up on while the next measurement runs.
 */
export async function vacuumAnalyze(servers: Servers): Promise<void> {
  const postgres = server(servers, 'postgres');
  for (const database of await postgresDatabases(postgres)) {
    await queryPostgres(postgres, database, 'VACUUM ANALYZE');
  }
}

function server(servers: Servers, name: keyof Servers): ServerProcess {
  const found = servers[name];
  if (found === undefined) throw new Error(`the stack has no ${name} of its own to read`);
  return found;
}

/** Commands FerretDB answered, by command name. */
async function ferretdbCommands(ferretdb: ServerProcess): Promise<Record<string, number>> {
  if (ferretdb.metricsUrl === undefined) throw new Error('FerretDB serves no metrics');
  const response = await fetch(ferretdb.metricsUrl, { signal: AbortSignal.timeout(10_000) });
  if (response.status !== 200) throw new Error(`FerretDB metrics: ${response.status}`);
  return sumOfMetricBy(await response.text(), 'ferretdb_client_requests_total', 'command');
}

/** One metric in Prometheus' text format, summed per value of `label` over the other labels. */
function sumOfMetricBy(exposition: string, metric: string, label: string): Record<string, number> {
  const sums: Record<string, number> = {};
  const labelValue = new RegExp(`[{,]${label}="([^"]*)"`);
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(`${metric}{`) && !line.startsWith(`${metric} `)) continue;
    const key = labelValue.exec(line)?.[1] ?? '';
    sums[key] = (sums[key] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sums;
}

async function natsMessages(nats: ServerProcess): Promise<{ in_msgs: number; out_msgs: number }> {
  const port = commandLineValue(nats, '--http_port');
  const response = await fetch(`http://127.0.0.1:${port}/varz`, {
    signal: AbortSignal.timeout(10_000),
  });
  if (response.status !== 200) throw new Error(`NATS /varz: ${response.status}`);
  return (await response.json()) as { in_msgs: number; out_msgs: number };
}

async function postgresDatabases(postgres: ServerProcess): Promise<string[]> {
  const rows = await queryPostgres(
    postgres,
    'postgres',
    'SELECT datname FROM pg_database WHERE NOT datistemplate',
  );
  return rows.map(([name]) => name!);
}

/** The psql installed with the launcher's PostgreSQL server, so client and server match. */
function psqlPath(): string {
  return join(dirname(realpathSync(toolPath('postgres'))), 'psql');
}

/** Rows of `sql` as text fields, through psql as the launcher's trusted `postgres` user. */
async function queryPostgres(
  postgres: ServerProcess,
  database: string,
  sql: string,
): Promise<string[][]> {
  const port = commandLineValue(postgres, '-p');
  const { stdout } = await execFile(
    psqlPath(),
    [
      ...['-h', '127.0.0.1', '-p', port, '-U', 'postgres', '-d', database],
      // No psqlrc; tuples only, unaligned, tab between fields.
      ...['-X', '-A', '-t', '-q', '-F', '\t', '-c', sql],
    ],
    // VACUUM of a freshly loaded store takes a while; a query, milliseconds.
    { env: { ...process.env, PGCONNECT_TIMEOUT: '10' }, timeout: 600_000 },
  );
  return String(stdout)
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\t'));
}

/** The value after `flag` on a running server's command line. */
function commandLineValue(running: ServerProcess, flag: string): string {
  const pid = running.pid();
  if (pid === undefined) throw new Error(`${running.name} is not running`);
  const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const value = args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined;
  if (value === undefined) throw new Error(`${running.name} was not started with ${flag}`);
  return value;
}
