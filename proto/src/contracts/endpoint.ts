import type { z } from 'zod';

/**
 * The request/reply contracts between services, on `svc.<service>.<name>` (namespaced by the
 * topology). Each endpoint is served by a queue group of its owning service; requests and
 * responses are validated on both ends with these schemas. Failures travel as ServiceError
 * JSON (`{ code, message, details }`) and are rethrown as ServiceError by the caller.
 */
export interface EndpointDefinition<Request extends z.ZodType, Response extends z.ZodType> {
  service: string;
  name: string;
  request: Request;
  response: Response;
}

export function endpoint<Request extends z.ZodType, Response extends z.ZodType>(
  service: string,
  name: string,
  request: Request,
  response: Response,
): EndpointDefinition<Request, Response> {
  return { service, name, request, response };
}
