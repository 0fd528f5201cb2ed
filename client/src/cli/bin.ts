import { main } from './main';

// exitCode rather than exit(): piped output is flushed before the process ends.
process.exitCode = await main(process.argv.slice(2));
