import multipart from '@fastify/multipart';
import { billingEndpoints, type Pipeline } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { customerProblemOf } from '../notices';
import { PRESET_CHOICES, tryPage } from '../pages/try';
import { checkFormToken, DASHBOARD_PATH } from '../session';

const HTML = 'text/html; charset=utf-8';

/**
 * The most a file sent through this form may weigh: it is held in the gateway's memory while it
 * is stored (the API's presigned uploads take up to the plan's limit, straight to storage).
 */
export const TRY_MAX_BYTES = 25 * 1024 * 1024;

interface TryForm {
  csrf?: string;
  choice?: (typeof PRESET_CHOICES)[number];
  file?: { filename: string; bytes: Buffer };
}

/** "Try it": upload one file, pick a preset, follow the job on its page. */
export const tryRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  await app.register(multipart, {
    limits: { fileSize: TRY_MAX_BYTES, files: 1, fields: 4, fieldSize: 1024, parts: 5 },
  });

  app.get('/try', async (request, reply) =>
    reply
      .type(HTML)
      .send(tryPage({ csrfToken: request.dashboardSession.csrfToken, maxBytes: TRY_MAX_BYTES })),
  );

  app.post('/try', { config: { checksFormToken: true } }, async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const form = await readTryForm(request);
    const problem = (message: string) =>
      reply
        .status(400)
        .type(HTML)
        .send(tryPage({ csrfToken, maxBytes: TRY_MAX_BYTES, problem: message }));
    if (form.choice === undefined) return problem('Choose a preset.');
    if (form.file === undefined || form.file.filename === '') return problem('Choose a file.');
    const account = await deps.rpc.call(billingEndpoints.getAccount, { accountId });
    try {
      const { job } = await deps.fileCompressions.compress({
        account,
        filename: form.file.filename,
        bytes: form.file.bytes,
        pipeline: form.choice.pipeline as Pipeline,
        preset: form.choice.preset,
      });
      return reply.redirect(`${DASHBOARD_PATH}/jobs/${encodeURIComponent(job.id)}`, 303);
    } catch (error) {
      const message = customerProblemOf(error);
      if (message === null) throw error;
      return problem(message);
    }
  });
};

/**
 * Reads the form's parts in their order: the form token first (refused before the file is read),
 * then the preset, then the file, held in memory up to TRY_MAX_BYTES.
 */
async function readTryForm(request: Parameters<typeof checkFormToken>[0]): Promise<TryForm> {
  const form: TryForm = {};
  for await (const part of request.parts()) {
    if (part.type === 'field') {
      const value = typeof part.value === 'string' ? part.value : '';
      if (part.fieldname === '_csrf') {
        checkFormToken(request, value);
        form.csrf = value;
      } else if (part.fieldname === 'preset') {
        form.choice = PRESET_CHOICES.find((choice) => choice.value === value);
      }
      continue;
    }
    if (form.csrf === undefined) checkFormToken(request, undefined);
    if (part.fieldname !== 'file') {
      part.file.resume();
      continue;
    }
    form.file = { filename: part.filename, bytes: await part.toBuffer() };
  }
  if (form.csrf === undefined) checkFormToken(request, undefined);
  return form;
}
