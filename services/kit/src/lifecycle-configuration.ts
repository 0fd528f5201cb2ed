import { STORAGE_LIFECYCLE_RULE_ID_PREFIX } from '@tamp/proto';

export interface LifecycleRule {
  id: string;
  prefix: string;
  days: number;
}

/**
 * The IDs Tamp's rules had before they carried STORAGE_LIFECYCLE_RULE_ID_PREFIX. They are Tamp's
 * by name alone: every start used to replace the bucket's whole configuration with exactly these
 * rules, so no operator's rule can have kept one of these IDs. Provisioning replaces them with
 * the prefixed ones.
 */
const LEGACY_RULE_IDS: ReadonlySet<string> = new Set([
  'expire-uploads',
  'expire-inputs',
  'expire-results',
]);

const S3_NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';

/** Whether a rule of the bucket is Tamp's own (replaced by provisioning) or someone else's. */
export function isTampRuleId(id: string): boolean {
  return id.startsWith(STORAGE_LIFECYCLE_RULE_ID_PREFIX) || LEGACY_RULE_IDS.has(id);
}

/** What to send so the bucket's configuration holds the wanted rules and everyone else's. */
export type LifecyclePlan =
  /** Already right: nothing is sent. */
  | { action: 'none' }
  /** PutBucketLifecycleConfiguration with this document. */
  | { action: 'put'; xml: string }
  /** No rule is left (S3 refuses an empty configuration): DeleteBucketLifecycle. */
  | { action: 'delete' };

/**
 * Merges Tamp's rules into a bucket's lifecycle configuration (`current`: the document
 * GetBucketLifecycleConfiguration returned, undefined when the bucket has none). Every rule
 * that is not Tamp's (isTampRuleId) is kept byte for byte, in its place; Tamp's are replaced by
 * `wanted`. The plan is `none` when Tamp's rules already are `wanted` (in any order and
 * spelling S3 returns them), so a start against a bucket that is right sends no write at all.
 */
export function planLifecycle(
  current: string | undefined,
  wanted: readonly LifecycleRule[],
): LifecyclePlan {
  const document = current === undefined ? undefined : readXml(current);
  const rules = document?.children.filter((element) => element.name === 'Rule') ?? [];
  const ours = rules.filter((rule) => isTampRuleId(ruleId(rule)));
  const others = rules.filter((rule) => !isTampRuleId(ruleId(rule)));
  const present = ours.map(canonical).sort();
  const target = wanted.map((rule) => canonical(readXml(ruleXml(rule)))).sort();
  if (present.length === target.length && present.every((rule, i) => rule === target[i])) {
    return { action: 'none' };
  }
  if (others.length === 0 && wanted.length === 0) return { action: 'delete' };
  const kept = others.map((rule) => (current as string).slice(rule.start, rule.end));
  return {
    action: 'put',
    xml: `<LifecycleConfiguration xmlns="${S3_NAMESPACE}">${[...kept, ...wanted.map(ruleXml)].join('')}</LifecycleConfiguration>`,
  };
}

/** Every rule of a configuration, in the simple shape Tamp's own rules have (for tests, logs). */
export function summarizeLifecycle(current: string | undefined): LifecycleRule[] {
  if (current === undefined) return [];
  return readXml(current)
    .children.filter((element) => element.name === 'Rule')
    .map((rule) => {
      const filter = child(rule, 'Filter');
      const prefix =
        child(filter, 'Prefix') ?? child(child(filter, 'And'), 'Prefix') ?? child(rule, 'Prefix');
      return {
        id: ruleId(rule),
        prefix: prefix?.text ?? '',
        days: Number(child(child(rule, 'Expiration'), 'Days')?.text ?? 0),
      };
    });
}

/** One of Tamp's rules as S3 takes it: enabled, by key prefix, expiring after `days`. */
function ruleXml(rule: LifecycleRule): string {
  return (
    `<Rule><ID>${escapeXml(rule.id)}</ID><Status>Enabled</Status>` +
    `<Filter><Prefix>${escapeXml(rule.prefix)}</Prefix></Filter>` +
    `<Expiration><Days>${rule.days}</Days></Expiration></Rule>`
  );
}

function ruleId(rule: XmlElement): string {
  return child(rule, 'ID')?.text ?? '';
}

// ---------------------------------------------------------------------------------------------
// Just enough XML for a lifecycle configuration: elements, text, entities, CDATA, comments and
// the prolog; attributes are skipped. Each element keeps where it stood in the document, so the
// rules that are not Tamp's are written back exactly as they were read (a parse and rebuild
// through a general XML library would turn a prefix like "0010" into the number 10).

interface XmlElement {
  /** The local name (a namespace prefix, which S3 does not use, is dropped). */
  name: string;
  /** The decoded text of an element without child elements; empty otherwise. */
  text: string;
  children: XmlElement[];
  /** Where the element starts and ends (exclusive) in the document it was read from. */
  start: number;
  end: number;
}

const TOKEN =
  /<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!\[CDATA\[([\s\S]*?)\]\]>|<(\/?)([A-Za-z_][\w.:-]*)(?:\s[^>]*?)?(\/?)>|([^<]+)|</g;

function readXml(xml: string): XmlElement {
  type Open = XmlElement & { texts: string[] };
  const stack: Open[] = [];
  let root: XmlElement | undefined;
  const unreadable = (why: string) =>
    new Error(`unreadable bucket lifecycle configuration: ${why}`);
  for (const match of xml.matchAll(TOKEN)) {
    const [token, cdata, closing, qualifiedName, selfClosing, text] = match;
    const top = stack.at(-1);
    if (cdata !== undefined || text !== undefined) {
      if (top !== undefined) top.texts.push(cdata ?? decodeEntities(text as string));
      else if ((text ?? cdata ?? '').trim() !== '') throw unreadable('text outside the root');
      continue;
    }
    if (qualifiedName === undefined) {
      if (token === '<') throw unreadable(`stray "<" at ${match.index}`);
      continue; // a comment or the prolog
    }
    const name = qualifiedName.slice(qualifiedName.lastIndexOf(':') + 1);
    if (closing === '/') {
      if (top === undefined || top.name !== name) throw unreadable(`unexpected </${name}>`);
      stack.pop();
      close(top, match.index + token.length);
      continue;
    }
    const element: Open = { name, text: '', children: [], start: match.index, end: 0, texts: [] };
    if (top !== undefined) top.children.push(element);
    else if (root === undefined) root = element;
    else throw unreadable('more than one root element');
    if (selfClosing === '/') close(element, match.index + token.length);
    else stack.push(element);
  }
  if (root === undefined || stack.length > 0) throw unreadable('incomplete document');
  return root;

  function close(element: Open, end: number): void {
    element.end = end;
    if (element.children.length === 0) element.text = element.texts.join('');
    delete (element as Partial<Open>).texts;
  }
}

function child(element: XmlElement | undefined, name: string): XmlElement | undefined {
  return element?.children.find((each) => each.name === name);
}

/** The same for any order of child elements and any whitespace between them. */
function canonical(element: XmlElement): string {
  if (element.children.length === 0) return `${element.name}=${JSON.stringify(element.text)}`;
  return `${element.name}{${element.children.map(canonical).sort().join(',')}}`;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (entity, body: string) => {
    if (body.startsWith('#x')) return String.fromCodePoint(Number.parseInt(body.slice(2), 16));
    if (body.startsWith('#')) return String.fromCodePoint(Number.parseInt(body.slice(1), 10));
    return ENTITIES[body] ?? entity;
  });
}

function escapeXml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (char) => `&${Object.keys(ENTITIES).find((name) => ENTITIES[name] === char)};`,
  );
}
