import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TOOLS_DIR, withBuildLock } from './provision';

describe('withBuildLock', () => {
  const name = `test-${randomBytes(4).toString('hex')}`;
  afterEach(() => rm(join(TOOLS_DIR, 'locks', `${name}.lock`), { recursive: true, force: true }));

  it('runs two builds of one name one after the other, the second saying it waits', async () => {
    const events: string[] = [];
    const messages: string[] = [];
    const build = (label: string) => async () => {
      events.push(`${label} start`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      events.push(`${label} end`);
    };
    await Promise.all([
      withBuildLock(name, (message) => messages.push(message), build('first')),
      new Promise((resolve) => setTimeout(resolve, 50)).then(() =>
        withBuildLock(name, (message) => messages.push(message), build('second')),
      ),
    ]);
    expect(events).toEqual(['first start', 'first end', 'second start', 'second end']);
    expect(messages).toEqual([`Waiting for another process's build of ${name}…`]);
  });

  it('releases the lock when the build fails', async () => {
    await expect(
      withBuildLock(
        name,
        () => {},
        async () => {
          throw new Error('compiler crashed');
        },
      ),
    ).rejects.toThrow('compiler crashed');
    const messages: string[] = [];
    await withBuildLock(
      name,
      (message) => messages.push(message),
      async () => {},
    );
    expect(messages).toEqual([]);
  });
});
