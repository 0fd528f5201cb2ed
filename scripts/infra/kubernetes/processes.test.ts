import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isAlive } from './processes';

describe('isAlive', () => {
  it('is true for a running process and false once it has ended and been reaped', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const pid = child.pid!;
    expect(isAlive(pid)).toBe(true);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(isAlive(pid)).toBe(false);
  });

  it('is true for this process', () => {
    expect(isAlive(process.pid)).toBe(true);
  });
});
