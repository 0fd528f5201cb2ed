import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness } from './harness';

const harness = new Harness();

beforeAll(() => harness.start());
afterAll(() => harness.stop());

interface Document {
  servers?: { url: string }[];
  paths: Record<string, Record<string, { operationId?: string }>>;
}

describe('the OpenAPI document', () => {
  it('passes the Redocly linter (recommended rules), offline', async () => {
    const source = (await harness.app.inject({ url: '/openapi.json' })).body;
    const config = await createConfig({
      extends: ['recommended'],
      // Tamp declares no licence yet; every other recommended rule applies.
      rules: { 'info-license': 'off' },
    });
    const problems = await lintFromString({ source, absoluteRef: 'openapi.json', config });
    expect(
      problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message}`),
    ).toEqual([]);
  });

  it('names every operation, uniquely, and says where the API is', async () => {
    const document = (await harness.app.inject({ url: '/openapi.json' })).json() as Document;
    const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods));
    const ids = operations.map((operation) => operation.operationId);
    expect(ids).toHaveLength(13);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(['createImageJob', 'getJob', 'listAudioPresets']));
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('documents wait and limit as the integers they are validated as', async () => {
    const document = (await harness.app.inject({ url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, { parameters: { name: string; schema: object }[] }>>;
    };
    const parameter = (path: string, name: string) =>
      document.paths[path]!.get!.parameters.find((candidate) => candidate.name === name)!.schema;
    expect(parameter('/v1/jobs/{id}', 'wait')).toEqual({
      type: 'integer',
      minimum: 0,
      maximum: 30,
    });
    expect(parameter('/v1/jobs', 'limit')).toMatchObject({
      type: 'integer',
      minimum: 1,
      maximum: 100,
    });
  });
});
