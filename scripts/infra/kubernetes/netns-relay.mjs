// Runs inside the cluster's network namespace: each connection to the Unix socket given as the
// only argument names a "host:port" of the namespace on its first line, and is then piped to it.
// A Unix socket is a file, so the host side (relay.ts) reaches it without any route, veth or
// address in the host's network: the cluster stays unreachable from everywhere else.
// Plain JavaScript with no dependency: it runs with `node` before anything is installed.
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const socketPath = process.argv[2];
if (!socketPath) {
  console.error('usage: netns-relay.mjs <unix socket path>');
  process.exit(2);
}
rmSync(socketPath, { force: true });

const server = createServer((incoming) => {
  let header = '';
  const onData = (chunk) => {
    header += chunk.toString('latin1');
    const newline = header.indexOf('\n');
    if (newline === -1) {
      if (header.length > 300) incoming.destroy();
      return;
    }
    incoming.off('data', onData);
    incoming.pause();
    const target = header.slice(0, newline);
    const rest = Buffer.from(header.slice(newline + 1), 'latin1');
    const at = target.lastIndexOf(':');
    const outgoing = connect({
      host: target.slice(0, at).replace(/^\[|\]$/g, ''),
      port: Number(target.slice(at + 1)),
    });
    outgoing.once('connect', () => {
      if (rest.length > 0) outgoing.write(rest);
      incoming.pipe(outgoing);
      outgoing.pipe(incoming);
      incoming.resume();
    });
    outgoing.on('error', () => incoming.destroy());
    incoming.on('error', () => outgoing.destroy());
    incoming.on('close', () => outgoing.destroy());
    outgoing.on('close', () => incoming.destroy());
  };
  incoming.on('data', onData);
});
server.listen(socketPath, () => console.error(`relay listening on ${socketPath}`));
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    rmSync(socketPath, { force: true });
    process.exit(0);
  });
}
