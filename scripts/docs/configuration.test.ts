import { describe, expect, it } from 'vitest';
import { checkConfigurationDoc, GENERATE_COMMAND } from './configuration';

describe('docs/configuration.md', () => {
  it("is what the services' configuration schemas generate", async () => {
    const { upToDate } = await checkConfigurationDoc();
    expect(upToDate, `out of date: run ${GENERATE_COMMAND}`).toBe(true);
  });
});
