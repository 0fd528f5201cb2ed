import { inject } from 'vitest';

// Each test file of the `containers` project runs with the engine and images of
// test/setup/container-engine.ts in its environment, where testcontainers and
// @tamp/testcontainers look for them.
Object.assign(process.env, inject('containerEnvironment'));
