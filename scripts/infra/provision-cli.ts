import { provisionTools } from './provision';

// `npm run tools [-- profile|tool …]`: install what profiles or single tools need without starting
// anything.
const wanted = process.argv.length > 2 ? process.argv.slice(2) : ['test'];
await provisionTools(wanted);
console.error(`tools for ${wanted.map((name) => `"${name}"`).join(', ')} are ready in .tools/bin`);
