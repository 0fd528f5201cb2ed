import {
  ERROR_CODE_MEANINGS,
  ERROR_CODES,
  type ErrorCode,
  errorEnvelope,
  PIPELINES,
  type Pipeline,
  publicWebhookEvent,
} from '@tamp/proto';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { ERROR_RESPONSES, errorResponseComponents } from './error-responses';
import { type NamedExamples, OPERATION_EXAMPLES } from './examples';
import { headerRefs, REQUEST_ID_PARAMETER, RESPONSE_HEADERS, SUCCESS_HEADERS } from './headers';
import { webhooks } from './webhooks';

type Document = OpenAPIV3_1.Document;
type Operation = OpenAPIV3_1.OperationObject;

export interface DocumentSettings {
  /** The configured public base URL (PUBLIC_URL); undefined: the document's own origin. */
  publicUrl: string | undefined;
}

const JSON_MEDIA = 'application/json';
const SCHEMAS = '#/components/schemas/';

/** Where a schema proto names (`meta({ id })`) is in the document, as an output. */
function schemaRef(schema: z.ZodType): string {
  const id = z.globalRegistry.get(schema)?.id;
  if (id === undefined) throw new Error('proto gives this schema no id to refer to');
  return `${SCHEMAS}${id}`;
}

/** Every error code, its HTTP status and when it is answered: the rules a client can break. */
function errorCodeTable(): string {
  const rows = (Object.keys(ERROR_CODES) as ErrorCode[]).map(
    (code) => `| ${code} | ${ERROR_CODES[code]} | ${ERROR_CODE_MEANINGS[code]} |`,
  );
  return ['Error codes:', '', '| Code | HTTP | When |', '|---|---|---|', ...rows].join('\n');
}

const PIPELINE_TAGS: Record<Pipeline, string> = {
  audio: 'Audio jobs from .mp3 and .wav uploads, always queued; the audio presets and operations',
  image:
    'Image jobs from .jpg, .jpeg, .png and .webp uploads, inline when small; the image presets and operations',
  text: 'Text jobs from inline text or .pdf and .txt uploads, inline when small; the text presets and operations',
};

/**
 * Every tag an operation uses, in the order the reference page lists them. Webhooks have none:
 * the page lists them apart, under their own heading, and a tag of theirs would stand empty.
 */
const TAGS: OpenAPIV3_1.TagObject[] = [
  {
    name: 'uploads',
    description: 'Presigned upload URLs: the file goes straight to storage with PUT',
  },
  ...PIPELINES.map((name) => ({ name, description: PIPELINE_TAGS[name] })),
  {
    name: 'jobs',
    description:
      "Reading jobs: one job, long-polled until it finishes if asked, or the account's history",
  },
  { name: 'usage', description: 'Usage totals of the current billing period' },
];

/** The configured public URL, else wherever the document was fetched from (behind any ingress). */
function servers(publicUrl: string | undefined): OpenAPIV3_1.ServerObject[] {
  return publicUrl === undefined
    ? [{ url: '/', description: 'The server that serves this document' }]
    : [{ url: publicUrl, description: 'The Tamp API' }];
}

/** What no route says: what the API is, where it is, how it authenticates, its tags. */
export function documentHead(settings: DocumentSettings): Partial<Document> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tamp compression API',
      version: '1.0.0',
      description:
        'Compress audio, images and text through jobs. Every response is an envelope ' +
        '`{ success, data | error }` and carries `X-Request-Id`. Rate limits per account ' +
        '(free 60/min, pro 600/min) are reported in `RateLimit-*` headers; over the limit ' +
        'is 429 `RATE_LIMITED` with `Retry-After`. A queued job can also announce its end with ' +
        'a signed webhook (see Webhooks).\n\n' +
        errorCodeTable(),
    },
    servers: servers(settings.publicUrl),
    tags: TAGS,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'sk_live_… API key' },
      },
    },
    security: [{ apiKey: [] }],
  };
}

function jsonMedia(
  object: OpenAPIV3_1.RequestBodyObject | OpenAPIV3_1.ResponseObject,
): OpenAPIV3_1.MediaTypeObject | undefined {
  return object.content?.[JSON_MEDIA];
}

/** An error status's response, named once in `components.responses`. */
function errorResponse(
  operationId: string,
  status: string,
  response: OpenAPIV3_1.ResponseObject,
): OpenAPIV3_1.ReferenceObject {
  const named = ERROR_RESPONSES[status]!;
  // The component says the body is the error envelope: so must the route it stands for.
  const schema = jsonMedia(response)?.schema as OpenAPIV3_1.ReferenceObject | undefined;
  if (schema?.$ref !== schemaRef(errorEnvelope)) {
    throw new Error(`${operationId} ${status} does not answer the error envelope`);
  }
  return { $ref: `#/components/responses/${named.name}` };
}

/** A success response with its headers and examples of its `data`, in the envelope. */
function successResponse(
  response: OpenAPIV3_1.ResponseObject,
  examples: NamedExamples | undefined,
): OpenAPIV3_1.ResponseObject {
  const media = jsonMedia(response);
  if (media !== undefined && examples !== undefined) {
    media.examples = Object.fromEntries(
      Object.entries(examples).map(([name, { summary, value }]) => [
        name,
        { summary, value: { success: true, data: value } },
      ]),
    );
  }
  return { ...response, headers: headerRefs(SUCCESS_HEADERS) };
}

function completeOperation(operation: Operation): void {
  const operationId = operation.operationId ?? '';
  const examples = OPERATION_EXAMPLES[operationId];
  const parameters = (operation.parameters ?? []) as OpenAPIV3_1.ParameterObject[];
  for (const parameter of parameters) {
    const example = examples?.parameters?.[parameter.name];
    if (example !== undefined) parameter.example = example;
  }
  operation.parameters = [{ $ref: '#/components/parameters/RequestId' }, ...parameters];
  const body = operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
  const bodyMedia = body && jsonMedia(body);
  if (bodyMedia !== undefined && examples?.requestBody !== undefined) {
    bodyMedia.examples = examples.requestBody;
  }
  const responses = operation.responses ?? {};
  for (const [status, response] of Object.entries(responses)) {
    const declared = response as OpenAPIV3_1.ResponseObject;
    responses[status] =
      status in ERROR_RESPONSES
        ? errorResponse(operationId, status, declared)
        : successResponse(declared, examples?.responses[status]);
  }
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

function operationsOf(document: Document): Operation[] {
  return Object.values(document.paths ?? {}).flatMap((pathItem) =>
    METHODS.flatMap((method) => {
      const operation = (pathItem as Record<string, Operation | undefined> | undefined)?.[method];
      return operation === undefined ? [] : [operation];
    }),
  );
}

/**
 * fastify-type-provider-zod puts every named schema in twice (as an input and as an output);
 * the document keeps the ones it refers to, directly or through another schema.
 */
function withUsedSchemasOnly(document: Document): Document {
  const schemas = document.components?.schemas ?? {};
  const used = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith(SCHEMAS)) {
        const name = child.slice(SCHEMAS.length);
        if (!used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        }
      } else {
        visit(child);
      }
    }
  };
  visit({ ...document, components: { ...document.components, schemas: {} } });
  const kept = Object.keys(schemas)
    .filter((name) => used.has(name))
    .sort();
  return {
    ...document,
    components: {
      ...document.components,
      schemas: Object.fromEntries(kept.map((name) => [name, asComponent(schemas[name]!)])),
    },
  };
}

/**
 * A named schema without the `$id` and `$schema` zod gives it: an `$id` of
 * `#/components/schemas/Job` makes that the base of the references inside it, which then
 * resolve nowhere; the dialect is the document's own (OpenAPI 3.1: JSON Schema 2020-12).
 */
function asComponent(schema: OpenAPIV3_1.SchemaObject): OpenAPIV3_1.SchemaObject {
  const {
    $id: _id,
    $schema: _dialect,
    ...component
  } = schema as OpenAPIV3_1.SchemaObject & {
    $id?: string;
  };
  return component;
}

/**
 * The document @fastify/swagger made from the routes' zod schemas, completed: each error status
 * a reference to its named response, the headers the gateway sends, an example of every request
 * body and response, the webhooks, and only the named schemas it uses.
 */
export function completeDocument(generated: Document): Document {
  for (const operation of operationsOf(generated)) completeOperation(operation);
  return withUsedSchemasOnly({
    ...generated,
    webhooks: webhooks(schemaRef(publicWebhookEvent)) as Document['webhooks'],
    components: {
      ...generated.components,
      headers: RESPONSE_HEADERS,
      parameters: { RequestId: REQUEST_ID_PARAMETER },
      responses: errorResponseComponents(schemaRef(errorEnvelope)),
    },
  });
}
