import { generateDocument, seededRandom } from './random-document';

/** A fenced JSON array of uniform objects: what json-to-toon converts. */
function jsonBlock(rows: number, offset: number): string {
  const records = Array.from({ length: rows }, (_, i) => ({
    id: offset + i,
    city: `City ${offset + i}`,
    temperature: 10 + ((offset + i) % 7),
  }));
  return `Raw data:\n\`\`\`json\n${JSON.stringify(records, null, 2)}\n\`\`\`\n\n`;
}

/**
 * A messy document of at most `characters` UTF-16 units, cut after a line feed: generated
 * prose and code with a JSON block every few paragraphs, so every operation has work to do.
 */
export function largeDocument(characters: number, seed = 1): string {
  const random = seededRandom(seed);
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < characters; i++) {
    const part = i % 5 === 0 ? jsonBlock(10 + (i % 30), i) : generateDocument(random).text;
    parts.push(part);
    length += part.length;
  }
  const text = parts.join('');
  return text.slice(0, text.lastIndexOf('\n', characters - 1) + 1);
}
