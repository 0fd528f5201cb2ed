// The SDK's type declarations, emitted by TypeScript from src/index.ts and made to stand on their
// own in an installed package:
// - the types the SDK takes from @tamp/proto, a workspace package customers do not have, are
//   written out in full into proto.d.ts (a zod schema's inferred type becomes the plain object
//   type it is), so the declarations need no package at all, not even zod;
// - relative imports get the `.js` that Node's ESM resolution (TypeScript's `node16` and
//   `nodenext`) requires of declarations too.
// Only the files index.d.ts reaches are kept; one that imports any other package fails the build.
import { dirname, join, posix, relative } from 'node:path';
import ts from 'typescript';

const PROTO = '@tamp/proto';
const PROTO_DECLARATIONS = 'proto.d.ts';
const ENTRY = 'index.d.ts';

/** The declarations, by path relative to the folder they are meant for. */
export function sdkDeclarations(clientRoot) {
  const program = ts.createProgram({
    rootNames: [join(clientRoot, 'src', 'index.ts')],
    options: compilerOptions(clientRoot),
  });
  const emitted = emitInMemory(program, join(clientRoot, 'src'));
  const { files, protoNames } = standalone(emitted);
  files.set(PROTO_DECLARATIONS, protoTypes(program, clientRoot, protoNames));
  return files;
}

/** The repository's compiler options (strictness, libraries, resolution), emitting declarations. */
function compilerOptions(clientRoot) {
  const repositoryRoot = dirname(clientRoot);
  const configPath = join(repositoryRoot, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
  if (error !== undefined) throw new Error(describe([error]));
  const { options, errors } = ts.convertCompilerOptionsFromJson(
    config.compilerOptions,
    repositoryRoot,
    configPath,
  );
  if (errors.length > 0) throw new Error(describe(errors));
  return {
    ...options,
    noEmit: false,
    declaration: true,
    emitDeclarationOnly: true,
    rootDir: join(clientRoot, 'src'),
    outDir: join(clientRoot, 'src'),
  };
}

function emitInMemory(program, outDir) {
  const emitted = new Map();
  const result = program.emit(undefined, (fileName, text) => {
    emitted.set(relative(outDir, fileName).split('\\').join('/'), text);
  });
  if (result.emitSkipped || result.diagnostics.length > 0) {
    throw new Error(`declarations not emitted:\n${describe(result.diagnostics)}`);
  }
  return emitted;
}

/**
 * Follows the imports from index.d.ts, rewriting each specifier: a relative one to the file with
 * its extension, @tamp/proto to proto.d.ts (collecting the names taken from it).
 */
function standalone(emitted) {
  const files = new Map();
  const protoNames = new Set();
  const pending = [ENTRY];
  while (pending.length > 0) {
    const path = pending.pop();
    if (files.has(path)) continue;
    const text = emitted.get(path);
    const replacements = [];
    for (const specifier of moduleSpecifiers(path, text)) {
      if (specifier.text === PROTO) {
        for (const name of specifier.names) protoNames.add(name);
        replacements.push({ specifier, to: relativeSpecifier(path, 'proto.js') });
        continue;
      }
      const target = relativeTarget(emitted, path, specifier.text);
      pending.push(target);
      replacements.push({
        specifier,
        to: relativeSpecifier(path, target.replace(/\.d\.ts$/, '.js')),
      });
    }
    files.set(path, replaced(text, replacements));
  }
  return { files, protoNames };
}

/** Every module a declaration file names, with the names it takes from it. */
function moduleSpecifiers(path, text) {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    const literal = specifierOf(node);
    if (literal !== undefined)
      found.push({ node: literal, text: literal.text, names: namesOf(node) });
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function specifierOf(node) {
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return node.moduleSpecifier;
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument))
    return node.argument.literal;
  return undefined;
}

/** The exported names an import, re-export or `import("…").Name` takes; `*` for all of them. */
function namesOf(node) {
  if (ts.isImportTypeNode(node)) {
    let qualifier = node.qualifier;
    while (qualifier !== undefined && ts.isQualifiedName(qualifier)) qualifier = qualifier.left;
    return qualifier === undefined ? ['*'] : [qualifier.text];
  }
  const bindings = ts.isImportDeclaration(node)
    ? node.importClause?.namedBindings
    : node.exportClause;
  if (bindings === undefined || !('elements' in bindings)) return ['*'];
  return bindings.elements.map((element) => (element.propertyName ?? element.name).text);
}

function relativeTarget(emitted, from, specifier) {
  if (!specifier.startsWith('.')) {
    throw new Error(`${from} imports ${specifier}: the declarations must need no package`);
  }
  const base = posix.join(posix.dirname(from), specifier);
  const target = [`${base}.d.ts`, `${base}/index.d.ts`].find((path) => emitted.has(path));
  if (target === undefined) throw new Error(`${from} imports ${specifier}, which was not emitted`);
  return target;
}

function relativeSpecifier(from, to) {
  const path = posix.relative(posix.dirname(from), to);
  return path.startsWith('.') ? path : `./${path}`;
}

function replaced(text, replacements) {
  let result = text;
  const fromTheEnd = [...replacements].sort((a, b) => b.specifier.node.end - a.specifier.node.end);
  for (const { specifier, to } of fromTheEnd) {
    const { node } = specifier;
    result = `${result.slice(0, node.getStart())}'${to}'${result.slice(node.end)}`;
  }
  return result;
}

/**
 * Each type the SDK takes from @tamp/proto, written out as the type it is: what a customer's
 * editor shows for it, with no schema library behind it.
 */
function protoTypes(program, clientRoot, names) {
  const checker = program.getTypeChecker();
  const exports = protoExports(program, checker, clientRoot);
  const printer = ts.createPrinter({ newLine: ts.NewLineKind.LineFeed });
  const file = ts.createSourceFile(PROTO_DECLARATIONS, '', ts.ScriptTarget.Latest);
  const declarations = [...names].sort().map((name) => {
    if (name === '*') throw new Error(`the SDK takes all of ${PROTO}: name the types it needs`);
    const exported = exports.get(name);
    if (exported === undefined) throw new Error(`${PROTO} exports no ${name}`);
    const symbol =
      exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declaration = writtenOut(checker, symbol);
    const text = printer.printNode(ts.EmitHint.Unspecified, declaration, file);
    if (text.includes('import(')) {
      throw new Error(`${PROTO}'s ${name} refers to a type that is not written out:\n${text}`);
    }
    return `${docComment(checker, symbol)}${text}`;
  });
  return `// The types the SDK takes from Tamp's API contracts, written out by scripts/declarations.mjs.\n${declarations.join('\n')}\n`;
}

function protoExports(program, checker, clientRoot) {
  const index = join(clientRoot, 'src', 'index.ts');
  const resolved = ts.resolveModuleName(PROTO, index, program.getCompilerOptions(), ts.sys);
  const fileName = resolved.resolvedModule?.resolvedFileName;
  const file = fileName === undefined ? undefined : program.getSourceFile(fileName);
  if (file === undefined) throw new Error(`${PROTO} is not in the program`);
  const module = checker.getSymbolAtLocation(file);
  return new Map(checker.getExportsOfModule(module).map((symbol) => [symbol.name, symbol]));
}

const WRITTEN_OUT =
  ts.NodeBuilderFlags.InTypeAlias |
  ts.NodeBuilderFlags.NoTruncation |
  ts.NodeBuilderFlags.MultilineObjectLiterals;

function writtenOut(checker, symbol) {
  const exported = [ts.factory.createModifier(ts.SyntaxKind.ExportKeyword)];
  const generic = symbol.declarations?.some((node) => node.typeParameters !== undefined);
  if (generic) throw new Error(`${symbol.name} is generic, which proto.d.ts does not write out`);
  const type = checker.getDeclaredTypeOfSymbol(symbol);
  if (symbol.flags & ts.SymbolFlags.TypeAlias) {
    return ts.factory.createTypeAliasDeclaration(
      exported,
      symbol.name,
      undefined,
      typeNode(checker, type),
    );
  }
  if (symbol.flags & ts.SymbolFlags.Interface) {
    const members = checker
      .getPropertiesOfType(type)
      .map((property) =>
        ts.factory.createPropertySignature(
          undefined,
          property.name,
          property.flags & ts.SymbolFlags.Optional
            ? ts.factory.createToken(ts.SyntaxKind.QuestionToken)
            : undefined,
          typeNode(checker, checker.getTypeOfSymbol(property)),
        ),
      );
    return ts.factory.createInterfaceDeclaration(
      exported,
      symbol.name,
      undefined,
      undefined,
      members,
    );
  }
  throw new Error(`${PROTO}'s ${symbol.name} is not a type, so the SDK cannot take it from there`);
}

function typeNode(checker, type) {
  const node = checker.typeToTypeNode(type, undefined, WRITTEN_OUT);
  if (node === undefined) throw new Error(`cannot write out ${checker.typeToString(type)}`);
  return node;
}

function docComment(checker, symbol) {
  const text = ts.displayPartsToString(symbol.getDocumentationComment(checker));
  return text === '' ? '' : `/** ${text.split('\n').join('\n * ')} */\n`;
}

function describe(diagnostics) {
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: ts.sys.getCurrentDirectory,
    getNewLine: () => '\n',
  });
}
