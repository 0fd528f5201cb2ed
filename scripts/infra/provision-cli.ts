import { provisionTools } from './provision';

// `npm run tools [-- profile]`: install what a profile needs without starting anything.
const profile = process.argv[2] ?? 'test';
await provisionTools(profile);
console.error(`tools for profile "${profile}" are ready in .tools/bin`);
