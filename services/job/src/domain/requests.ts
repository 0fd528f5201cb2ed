import type { EndpointRequest } from '@tamp/kit';
import type { jobEndpoints } from '@tamp/proto';
import type { z } from 'zod';

/** The createJob request after the endpoint schema parsed it (operations carry their defaults). */
export type CreateJobRequest = z.output<(typeof jobEndpoints)['createJob']['request']>;
export type CreateJobInput = EndpointRequest<(typeof jobEndpoints)['createJob']>;
