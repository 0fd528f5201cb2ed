import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { connectNats, createLogger, type NatsConnection, Rpc } from '@tamp/kit';
import { createTopology, newId, uploadEndpoints } from '@tamp/proto';
import { afterAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';

const infrastructure = isolatedInfrastructure();
const logger = createLogger('upload-main-test', 'silent');
const mainPath = fileURLToPath(new URL('../src/main.ts', import.meta.url));
let child: ChildProcess | undefined;
let nats: NatsConnection | undefined;

afterAll(async () => {
  if (child?.exitCode === null) child.kill('SIGKILL');
  await nats?.close();
});

describe('the upload process (main.ts)', () => {
  it('starts from its environment, serves create-upload, and stops cleanly on SIGTERM', async () => {
    const uploadProcess = spawn(process.execPath, ['--import', 'tsx', mainPath], {
      env: { ...process.env, ...infrastructure.serviceEnv, OPS_PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = uploadProcess;
    let output = '';
    const started = new Promise<void>((resolve, reject) => {
      uploadProcess.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('"msg":"started"')) resolve();
      });
      uploadProcess.once('exit', (code) => reject(new Error(`exited with ${code}: ${output}`)));
    });
    await started;

    nats = await connectNats({ url: infrastructure.natsUrl, name: 'caller', logger });
    const rpc = new Rpc(nats, createTopology(infrastructure.namespace), logger);
    const upload = await rpc.call(uploadEndpoints.createUpload, {
      accountId: newId('account'),
      filename: 'song.mp3',
      size: 10,
      maxUploadBytes: 100,
    });
    expect(upload.contentType).toBe('audio/mpeg');

    const exited = once(uploadProcess, 'exit');
    uploadProcess.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
  });
});
