// Preloaded into each service by scripts/measure/cpu-profile.ts (NODE_OPTIONS=--import): V8's
// sampling profiler, restarted on SIGUSR2, its profile written when the process exits. Node 20
// refuses --cpu-prof in NODE_OPTIONS, hence the inspector. Plain JavaScript: it loads before tsx.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';

const directory = process.env.TAMP_CPU_PROFILE_DIR;
if (directory !== undefined) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 1000 });
  session.post('Profiler.start');
  // SIGUSR2 starts the profile afresh, so it covers the measured load, not start-up and warm-up.
  process.on('SIGUSR2', () => {
    session.post('Profiler.stop', () => session.post('Profiler.start'));
  });
  // The same-thread inspector answers synchronously, so this completes inside the exit event.
  process.on('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (error === null) {
        const file = join(directory, `${process.pid}.${threadId}.cpuprofile`);
        writeFileSync(file, JSON.stringify(result.profile));
      }
    });
  });
}
