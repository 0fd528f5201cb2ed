import { isDeepStrictEqual } from 'node:util';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import * as proto from '@tamp/proto';
import {
  ERROR_CODES,
  isErrorCode,
  isId,
  successEnvelope,
  WEBHOOK_DELIVERY_HEADERS,
} from '@tamp/proto';
import type { OpenAPIV3_1 } from 'openapi-types';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { rateLimitWindowWithRoom } from '../../../test/support/rate-limit-window';
import { Harness } from './harness';

const harness = new Harness();

beforeAll(() => harness.start());
afterAll(() => harness.stop());

type Document = OpenAPIV3_1.Document;
type Operation = OpenAPIV3_1.OperationObject;
type Response = OpenAPIV3_1.ResponseObject;
type Media = OpenAPIV3_1.MediaTypeObject;

const JSON_MEDIA = 'application/json';
const SCHEMAS = '#/components/schemas/';
const ERROR_ENVELOPE = `${SCHEMAS}ErrorEnvelope`;

async function fetchDocument(app = harness.app): Promise<Document> {
  return (await app.inject({ url: '/openapi.json' })).json() as Document;
}

/** What a local `$ref` points at (components.responses, .parameters, .headers, .schemas). */
function resolve<Value>(document: Document, value: Value | OpenAPIV3_1.ReferenceObject): Value {
  if (typeof value !== 'object' || value === null || !('$ref' in value)) return value as Value;
  const target = value.$ref
    .slice(2)
    .split('/')
    .reduce<unknown>(
      (node, key) => (node as Record<string, unknown>)[key.replaceAll('~1', '/')],
      document,
    );
  if (target === undefined) throw new Error(`${value.$ref} resolves nowhere`);
  return resolve(document, target as Value);
}

interface Located {
  where: string;
  path: string;
  method: string;
  operation: Operation;
}

/** The API's operations, then the webhooks' (the requests Tamp sends). */
function operationsOf(document: Document, section: 'paths' | 'webhooks' = 'paths'): Located[] {
  return Object.entries(document[section] ?? {}).flatMap(([path, item]) =>
    Object.entries(item as Record<string, Operation>)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, operation]) => ({
        where: `${method.toUpperCase()} ${path}`,
        path,
        method,
        operation,
      })),
  );
}

/** The response documented for a status: the exact one, else its range (4XX). */
function documentedResponse(document: Document, operation: Operation, status: number): Response {
  const responses = operation.responses ?? {};
  const declared = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
  if (declared === undefined) throw new Error(`status ${status} is not documented`);
  return resolve(document, declared);
}

/**
 * Proto's named schemas, by the id they carry (`meta({ id })`); in the document a request body's
 * name has `Input` added (fastify-type-provider-zod's rule).
 */
const NAMED_SCHEMAS = new Map(
  (Object.values(proto) as unknown[])
    .filter((value): value is z.ZodType => value instanceof z.ZodType)
    .flatMap((schema) => {
      const id = z.globalRegistry.get(schema)?.id;
      return id === undefined ? [] : [[id, schema] as const];
    }),
);

function namedSchema(ref: string): z.ZodType {
  const name = ref.slice(SCHEMAS.length).replace(/Input$/, '');
  const schema = NAMED_SCHEMAS.get(name);
  if (schema === undefined) throw new Error(`no proto schema is named ${name}`);
  return schema;
}

/**
 * The proto schema a media type's JSON schema stands for: a named schema, or the success
 * envelope around one. Anything else would be a schema the document made up.
 */
function protoSchemaOf(media: Media): z.ZodType {
  const schema = media.schema as OpenAPIV3_1.SchemaObject & OpenAPIV3_1.ReferenceObject;
  if (schema.$ref !== undefined) return namedSchema(schema.$ref);
  const data = schema.properties?.data as OpenAPIV3_1.ReferenceObject | undefined;
  if (data?.$ref === undefined) throw new Error('an inline schema that is no success envelope');
  return successEnvelope(namedSchema(data.$ref));
}

/** Every media type with examples: request bodies, responses, named responses, webhooks. */
function examplesOf(document: Document): { where: string; media: Media; values: unknown[] }[] {
  const found: { where: string; media: Media }[] = [];
  for (const { where, operation } of [
    ...operationsOf(document),
    ...operationsOf(document, 'webhooks'),
  ]) {
    const body = operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
    if (body?.content?.[JSON_MEDIA]) found.push({ where, media: body.content[JSON_MEDIA] });
    for (const [status, response] of Object.entries(operation.responses ?? {})) {
      if ('$ref' in response) continue; // the named responses are below, once each
      const media = response.content?.[JSON_MEDIA];
      if (media !== undefined) found.push({ where: `${where} ${status}`, media });
    }
  }
  for (const [name, response] of Object.entries(document.components?.responses ?? {})) {
    const media = (response as Response).content?.[JSON_MEDIA];
    if (media !== undefined) found.push({ where: `components.responses.${name}`, media });
  }
  return found.map(({ where, media }) => ({
    where,
    media,
    values: [
      ...(media.example === undefined ? [] : [media.example]),
      ...Object.values(media.examples ?? {}).map(
        (example) => (example as OpenAPIV3_1.ExampleObject).value,
      ),
    ],
  }));
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
    const document = await fetchDocument();
    const ids = operationsOf(document).map(({ operation }) => operation.operationId);
    expect(ids).toHaveLength(13);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(['createImageJob', 'getJob', 'listAudioPresets']));
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('names the configured public URL as its server', async () => {
    const publicGateway = await new Harness().start({ publicUrl: 'https://api.tamp.test' });
    try {
      const document = await fetchDocument(publicGateway.app);
      expect(document.servers).toEqual([expect.objectContaining({ url: 'https://api.tamp.test' })]);
    } finally {
      await publicGateway.stop();
    }
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

  it('refers to the named error envelope, from named responses, instead of repeating it', async () => {
    const document = await fetchDocument();
    const schemas = document.components?.schemas ?? {};
    expect(Object.keys(schemas)).toEqual(
      expect.arrayContaining([
        'ErrorEnvelope',
        'Job',
        'JobList',
        'JobSummary',
        'Upload',
        'Usage',
        'PresetCatalogue',
        'OperationCatalogue',
        'WebhookEvent',
        'CreateUploadInput',
        'CreateAudioJobInput',
        'CreateImageJobInput',
        'CreateTextJobInput',
      ]),
    );
    for (const { where, operation } of operationsOf(document)) {
      const body = operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
      if (body !== undefined) {
        expect(body.content[JSON_MEDIA]?.schema, where).toEqual({
          $ref: expect.stringMatching(/^#\/components\/schemas\/\w+Input$/),
        });
      }
      for (const [status, declared] of Object.entries(operation.responses ?? {})) {
        if (status.startsWith('2')) {
          const data = protoSchemaOf((declared as Response).content![JSON_MEDIA]!);
          expect(data, `${where} ${status}`).toBeDefined();
          continue;
        }
        expect(declared, `${where} ${status}`).toEqual({
          $ref: expect.stringMatching(/^#\/components\/responses\/\w+$/),
        });
        const response = resolve(document, declared);
        expect(response.content?.[JSON_MEDIA]?.schema, `${where} ${status}`).toEqual({
          $ref: ERROR_ENVELOPE,
        });
      }
    }
    // Nowhere but in its own component is the envelope spelled out.
    const inlineEnvelopes = JSON.stringify({ ...document, components: {} }).match(
      /"success":\{"type":"boolean","(const":false|enum":\[false\])/g,
    );
    expect(inlineEnvelopes).toBeNull();
  });

  it('has an example of every request body and every response', async () => {
    const document = await fetchDocument();
    const missing: string[] = [];
    const hasExample = (media: Media | undefined) =>
      media !== undefined &&
      (media.example !== undefined || Object.keys(media.examples ?? {}).length > 0);
    for (const { where, operation } of operationsOf(document)) {
      const body = resolve(document, operation.requestBody);
      if (body !== undefined && !hasExample(body.content[JSON_MEDIA])) {
        missing.push(`${where} request body`);
      }
      for (const [status, declared] of Object.entries(operation.responses ?? {})) {
        const response = resolve<Response>(document, declared);
        if (!hasExample(response.content?.[JSON_MEDIA])) missing.push(`${where} ${status}`);
      }
    }
    for (const { where, operation } of operationsOf(document, 'webhooks')) {
      const body = resolve(document, operation.requestBody);
      if (!hasExample(body?.content[JSON_MEDIA])) missing.push(`${where} request body`);
    }
    expect(missing).toEqual([]);
  });

  it('gives only examples that the proto schema it names accepts', async () => {
    const document = await fetchDocument();
    const examples = examplesOf(document);
    expect(examples.length).toBeGreaterThan(20);
    const refused: string[] = [];
    for (const { where, media, values } of examples) {
      const schema = protoSchemaOf(media);
      // A request is parsed with its defaults filled in; an answer has none, and its schema
      // drops fields it does not know, which the document's schema would refuse: so an answer's
      // example must come out of parsing as it went in.
      const isRequest = (media.schema as { $ref?: string }).$ref?.endsWith('Input') === true;
      for (const value of values) {
        const parsed = schema.safeParse(value);
        if (!parsed.success) refused.push(`${where}: ${parsed.error.message}`);
        else if (!isRequest && !isDeepStrictEqual(parsed.data, value)) {
          refused.push(`${where}: holds fields its schema does not have`);
        }
      }
    }
    expect(refused).toEqual([]);
  });

  it("gives error examples whose codes are answered with their response's status", async () => {
    const document = await fetchDocument();
    for (const { where, operation } of operationsOf(document)) {
      for (const [status, declared] of Object.entries(operation.responses ?? {})) {
        if (status.startsWith('2')) continue;
        const media = resolve<Response>(document, declared).content![JSON_MEDIA]!;
        for (const example of Object.values(media.examples ?? {})) {
          const { code } = (example as { value: { error: { code: string } } }).value.error;
          expect(isErrorCode(code), code).toBe(true);
          const answered = String(ERROR_CODES[code as keyof typeof ERROR_CODES]);
          const fits = status.endsWith('XX') ? answered[0] === status[0] : answered === status;
          expect(fits, `${where} ${status}: an example of ${code} (${answered})`).toBe(true);
        }
      }
    }
  });

  it('names ids in their documented format in its examples', async () => {
    const document = await fetchDocument();
    const uploadIds = ['audioId', 'imageId', 'fileId'];
    for (const { where, operation } of operationsOf(document)) {
      const body = resolve(document, operation.requestBody);
      for (const example of Object.values(body?.content[JSON_MEDIA]?.examples ?? {})) {
        const value = (example as { value: Record<string, unknown> }).value;
        for (const field of uploadIds.filter((name) => name in value)) {
          expect(isId('upload', value[field]), `${where} ${field}`).toBe(true);
        }
      }
      for (const parameter of operation.parameters ?? []) {
        const { name, example } = resolve(document, parameter);
        if (name === 'id') expect(isId('job', example), where).toBe(true);
      }
    }
  });

  it("passes Redocly's example rules, which do refuse a broken example", async () => {
    const config = await createConfig({
      rules: {
        'no-invalid-media-type-examples': 'error',
        'no-invalid-parameter-examples': 'error',
        'no-invalid-schema-examples': 'error',
      },
    });
    const lint = async (document: Document) =>
      (
        await lintFromString({
          source: JSON.stringify(document),
          absoluteRef: 'openapi.json',
          config,
        })
      ).map((problem) => `${problem.ruleId} ${problem.location[0]?.pointer}`);
    const document = await fetchDocument();
    expect(await lint(document)).toEqual([]);

    const broken = await fetchDocument();
    const imageBody = resolve(broken, broken.paths!['/v1/image']!.post!.requestBody)!;
    const preset = imageBody.content[JSON_MEDIA]!.examples!.preset as { value: object };
    preset.value = { ...preset.value, operations: [{ type: 'encode' }] };
    const completed = broken.webhooks!['job.completed'] as { post: Operation };
    const event = resolve(broken, completed.post.requestBody)!.content[JSON_MEDIA]!.examples![
      'job.completed'
    ] as { value: { job: { status: string } } };
    event.value.job.status = 'done';
    expect(await lint(broken)).toEqual([
      expect.stringContaining('/paths/~1v1~1image/post/requestBody'),
      expect.stringContaining('/webhooks/job.completed/post/requestBody'),
    ]);
  });

  it('names the headers the gateway sends, and documents each where it is sent', async () => {
    const document = await fetchDocument();
    expect(Object.keys(document.components?.headers ?? {}).sort()).toEqual([
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
      'WWW-Authenticate',
      'X-Request-Id',
    ]);
    // Every header beyond HTTP's own that a Tamp answer may carry.
    const watched = [
      'x-request-id',
      'ratelimit-limit',
      'ratelimit-remaining',
      'ratelimit-reset',
      'retry-after',
      'www-authenticate',
      'location',
    ];
    const checked: string[] = [];
    const expectDocumented = (
      where: string,
      operation: Operation,
      answer: { statusCode: number; headers: Record<string, unknown> },
    ) => {
      const response = documentedResponse(document, operation, answer.statusCode);
      const documented = Object.entries(response.headers ?? {}).map(([name, header]) => ({
        name: name.toLowerCase(),
        required: resolve(document, header).required === true,
      }));
      const sent = watched.filter((name) => answer.headers[name] !== undefined);
      for (const name of sent) {
        expect(
          documented.map((header) => header.name),
          `${where} ${answer.statusCode} sends ${name}`,
        ).toContain(name);
      }
      for (const header of documented.filter((candidate) => candidate.required)) {
        expect(sent, `${where} ${answer.statusCode} promises ${header.name}`).toContain(
          header.name,
        );
      }
      checked.push(`${answer.statusCode}`);
    };

    const { apiKey } = harness.account();
    for (const { where, path, method, operation } of operationsOf(document)) {
      const body = resolve(document, operation.requestBody);
      const example = Object.values(body?.content[JSON_MEDIA]?.examples ?? {})[0] as
        | { value: unknown }
        | undefined;
      const answer = await harness.app.inject({
        method: method.toUpperCase() as 'GET' | 'POST',
        url: path.replace('{id}', 'job_01JQ7ZM0B5C8D2E4F6G8H0JKMN'),
        headers: { authorization: `Bearer ${apiKey}` },
        ...(example && { payload: example.value as object }),
      });
      expectDocumented(where, operation, answer);
      if (method === 'get' && path === '/v1/jobs') {
        expectDocumented(where, operation, await harness.app.inject({ url: path }));
      }
    }

    const jobs = operationsOf(document).find(({ path }) => path === '/v1/jobs')!;
    const limited = harness.account({ rateLimitPerMinute: 1 });
    // Both requests in one window, so the second is the account's second of that minute.
    await rateLimitWindowWithRoom(5_000);
    for (let attempt = 0; attempt < 2; attempt++) {
      expectDocumented(
        jobs.where,
        jobs.operation,
        await harness.app.inject({
          url: '/v1/jobs',
          headers: { authorization: `Bearer ${limited.apiKey}` },
        }),
      );
    }
    // Among them: 200 and 202, 401, 404 (an unknown job), 429, and 503 (usage: billing is not
    // served by the harness).
    expect(new Set(checked)).toEqual(new Set(['200', '202', '401', '404', '429', '503']));
  });

  it('sends every request-body example to the gateway: none is a validation error', async () => {
    const document = await fetchDocument();
    const { apiKey } = harness.account();
    const answers: string[] = [];
    for (const { where, path, method, operation } of operationsOf(document)) {
      const body = resolve(document, operation.requestBody);
      for (const [name, example] of Object.entries(body?.content[JSON_MEDIA]?.examples ?? {})) {
        const answer = await harness.app.inject({
          method: method.toUpperCase() as 'POST',
          url: path,
          headers: { authorization: `Bearer ${apiKey}` },
          payload: (example as { value: object }).value,
        });
        const code = answer.json<{ error?: { code: string } }>().error?.code;
        expect(code, `${where} ${name}: ${answer.body}`).not.toBe('VALIDATION_ERROR');
        // And the answer is one the document gives for the operation.
        expect(() => documentedResponse(document, operation, answer.statusCode)).not.toThrow();
        answers.push(`${where} ${name}`);
      }
    }
    expect(answers).toHaveLength(9);
  });

  it('declares every tag it uses, with a description', async () => {
    const document = await fetchDocument();
    const declared = new Map((document.tags ?? []).map((tag) => [tag.name, tag.description]));
    const used = [...operationsOf(document), ...operationsOf(document, 'webhooks')].flatMap(
      ({ operation }) => operation.tags ?? [],
    );
    expect(used.length).toBeGreaterThan(0);
    for (const tag of new Set(used)) {
      expect(declared.get(tag), tag).toEqual(expect.stringMatching(/\w/));
    }
  });

  it('describes, as an OpenAPI 3.1 webhook, every event proto defines', async () => {
    const document = await fetchDocument();
    expect(document.openapi).toMatch(/^3\.1\./);
    const events = proto.publicWebhookEvent.shape.event.options;
    expect(Object.keys(document.webhooks ?? {}).sort()).toEqual([...events].sort());
    for (const event of events) {
      const { post } = document.webhooks![event] as { post: Operation };
      const body = resolve(document, post.requestBody)!.content[JSON_MEDIA]!;
      expect(body.schema).toEqual({ $ref: `${SCHEMAS}WebhookEvent` });
      for (const example of Object.values(body.examples ?? {})) {
        expect((example as { value: { event: string } }).value.event).toBe(event);
      }
      const headers = (post.parameters ?? []).map((parameter) => resolve(document, parameter));
      expect(headers.map((header) => header.name)).toEqual(Object.keys(WEBHOOK_DELIVERY_HEADERS));
      expect(headers.every((header) => header.in === 'header')).toBe(true);
    }
  });

  it('says Idempotency-Key applies to queued jobs only, as the contract does', async () => {
    const document = await fetchDocument();
    for (const path of ['/v1/audio', '/v1/image', '/v1/text']) {
      const key = document
        .paths![path]!.post!.parameters!.map((parameter) =>
          resolve<OpenAPIV3_1.ParameterObject>(document, parameter),
        )
        .find((parameter) => parameter.name.toLowerCase() === 'idempotency-key')!;
      expect(key.description).toMatch(/Applies to queued jobs only/);
      expect(key.description).toMatch(/Inline jobs \(HTTP 200\) are not deduplicated/);
    }
  });
});

describe('the API reference page', () => {
  it('is Tamp-branded: its title, stylesheet, icon and logo', async () => {
    const page = await harness.app.inject({ url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<title>Tamp API reference</title>');
    const links = [...page.body.matchAll(/href="\.\/(static\/theme\/[^"]+)"/g)].map(
      (match) => match[1],
    );
    expect(links).toEqual(['static/theme/tamp.css', 'static/theme/favicon.svg']);
    const css = await harness.app.inject({ url: '/docs/static/theme/tamp.css' });
    expect(css.headers['content-type']).toMatch(/^text\/css/);
    expect(css.body).toContain('--accent: #0b57d0');
    const icon = await harness.app.inject({ url: '/docs/static/theme/favicon.svg' });
    expect(icon.headers['content-type']).toBe('image/svg+xml');
    expect(icon.body).toContain('<title>Tamp</title>');
    const script = await harness.app.inject({ url: '/docs/static/swagger-initializer.js' });
    expect(script.body).toContain('data:image/svg+xml;base64,');
  });
});
