import { GenericContainer, type StartedTestContainer } from 'testcontainers';
import type { Placement } from './placement.js';

/** One request Tamp's webhook service made, as the receiver got it. */
export interface WebhookDelivery {
  path: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** The raw body: verify the signature over exactly these bytes (UTF-8). */
  body: string;
}

export interface WebhookReceiver {
  /** The address to give Tamp as a `webhookUrl` (ends with `/hook`; any path is received). */
  url: string;
  /** Every delivery so far, oldest first. */
  deliveries(): Promise<WebhookDelivery[]>;
  /** Polls until a delivery satisfies `accept`, and returns it (fails after `timeoutMs`). */
  waitForDelivery(
    accept: (delivery: WebhookDelivery) => boolean,
    timeoutMs?: number,
  ): Promise<WebhookDelivery>;
  stop(): Promise<void>;
}

/**
 * A receiver that answers 204 to every POST and keeps it; `GET /deliveries` lists them. Node.js
 * only, so it runs in any Tamp image.
 */
const RECEIVER = `
const deliveries = [];
const port = Number(process.env.RECEIVER_PORT);
require('node:http').createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    if (request.method === 'GET' && request.url === '/deliveries') {
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify(deliveries));
      return;
    }
    const body = Buffer.concat(chunks).toString('utf8');
    deliveries.push({ path: request.url, headers: request.headers, body });
    response.statusCode = 204;
    response.end();
  });
}).listen(port, process.env.RECEIVER_HOST);
`;

export async function startWebhookReceiver(
  placement: Placement,
  image: string,
  alias: string,
  labels: Record<string, string>,
): Promise<WebhookReceiver> {
  // The port Tamp's images expose: podman lists an exposed port among the port bindings even
  // when it is not published, and testcontainers would wait for it to be bound.
  const port = await placement.port(9090);
  const container: StartedTestContainer = await placement
    .place(new GenericContainer(image), alias, [port])
    .withEntrypoint(['node'])
    .withCommand(['-e', RECEIVER])
    .withEnvironment({ RECEIVER_PORT: String(port), RECEIVER_HOST: placement.listenHost })
    .withLabels(labels)
    .withWaitStrategy(placement.waitForHttp('/deliveries', port))
    .start();
  const listUrl = `http://${placement.reach(container, port)}/deliveries`;
  const deliveries = async () => {
    const response = await fetch(listUrl);
    if (!response.ok) throw new Error(`${listUrl}: ${response.status}`);
    return (await response.json()) as WebhookDelivery[];
  };
  return {
    url: `http://${placement.address(alias, port)}/hook`,
    deliveries,
    async waitForDelivery(accept, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = (await deliveries()).find(accept);
        if (found !== undefined) return found;
        if (Date.now() > deadline) {
          throw new Error(`no matching webhook delivery within ${timeoutMs} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    },
    async stop() {
      await container.stop({ timeout: 0 });
    },
  };
}
