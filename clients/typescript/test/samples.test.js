// Compiles the TypeScript samples users read, with `tsc --strict --noEmit` against the
// package's built types (dist/index.d.ts here; the installed package's when CI runs this
// from the folder it installed the tarball into): every ```ts / ```typescript block of
// README.md, those of the docs (DELAYQ_DOCS_DIR, default ../../../docs) that import from
// 'delayq', and test/fixtures/consumer.ts. Docs are read, never written.
//
// Marker comments at the top of a block (README.md, "Samples"):
//   // sample: continues             - compiled as one module with the block before it
//   // sample: given <declaration>   - compiled as `declare <declaration>`
//   // sample: skip <reason>         - not compiled
// Each module is written as a .mts file in a temporary folder inside the package root, so
// that 'delayq' resolves as a user's import does (the package's exports, or node_modules).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const docsDir = process.env.DELAYQ_DOCS_DIR || resolve(root, '../../docs');

/** The ts blocks of `markdown`: { line (1-based, of the first code line), code }. */
export function tsBlocks(markdown) {
  const blocks = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(ts|typescript)\s*$/.exec(lines[i]);
    if (!open) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    const indent = open[1].length;
    blocks.push({ line: start + 1, code: lines.slice(start, end).map((l) => l.slice(indent)) });
    i = end;
  }
  return blocks;
}

/**
 * The modules to compile from one markdown file: blocks joined by `continues`, `given`
 * lines made declarations. Each module keeps, per generated line, its source line (or 0).
 */
export function samplesOf(file, markdown, { onlyUsingClient }) {
  const modules = [];
  for (const block of tsBlocks(markdown)) {
    const markers = [];
    let n = 0;
    while (n < block.code.length && /^\s*\/\/\s*sample:/.test(block.code[n])) markers.push(block.code[n++].replace(/^\s*\/\/\s*sample:\s*/, ''));
    const skip = markers.find((m) => m.startsWith('skip'));
    if (skip !== undefined) {
      assert.ok(skip.slice(4).trim().length > 0, `${file}:${block.line}: a skipped sample says why`);
      continue;
    }
    for (const m of markers) {
      assert.ok(m === 'continues' || m.startsWith('given ') || m.startsWith('skip'), `${file}:${block.line}: unknown marker "// sample: ${m}"`);
    }
    const continues = markers.includes('continues');
    const givens = markers.filter((m) => m.startsWith('given ')).map((m) => `declare ${m.slice(6).trim().replace(/;?$/, ';')}`);
    const body = block.code.slice(n).map((text, k) => ({ text, line: block.line + n + k }));
    if (continues) {
      assert.ok(modules.length > 0, `${file}:${block.line}: "continues" with no sample before it`);
      const last = modules.at(-1);
      last.givens.push(...givens);
      last.body.push(...body);
      last.blocks++;
    } else {
      modules.push({ file, line: block.line, givens, body, blocks: 1 });
    }
  }
  return modules.filter((m) => !onlyUsingClient || m.body.some((l) => /from\s+['"]delayq['"]/.test(l.text)));
}

test('the TypeScript samples of the README and the docs, and a consumer file, compile under tsc --strict', async (t) => {
  const ts = (await import('typescript')).default;
  const modules = samplesOf('README.md', await readFile(join(root, 'README.md'), 'utf8'), { onlyUsingClient: false });
  assert.ok(modules.length >= 1, 'the README has samples');
  if (existsSync(docsDir)) {
    for (const name of (await readdir(docsDir)).filter((f) => f.endsWith('.md')).sort()) {
      modules.push(...samplesOf(`docs/${name}`, await readFile(join(docsDir, name), 'utf8'), { onlyUsingClient: true }));
    }
  } else {
    t.diagnostic(`no docs at ${docsDir}: only the README's samples are compiled`);
  }
  const dir = await mkdtemp(join(root, '.samples-'));
  try {
    const files = new Map();
    for (const [i, m] of modules.entries()) {
      const lines = [...m.givens.map((text) => ({ text, line: 0 })), ...m.body, { text: 'export {};', line: 0 }];
      const path = join(dir, `sample-${i}.mts`);
      await writeFile(path, lines.map((l) => l.text).join('\n'));
      files.set(path, { source: m.file, lines });
    }
    const consumer = join(dir, 'consumer.mts');
    await writeFile(consumer, await readFile(join(here, 'fixtures/consumer.ts'), 'utf8'));
    files.set(consumer, { source: 'test/fixtures/consumer.ts', lines: null });
    const program = ts.createProgram([...files.keys()], {
      strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'],
      module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'], typeRoots: [join(root, 'node_modules/@types')], skipLibCheck: false,
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file) return `error TS${d.code}: ${text}`;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      const origin = files.get(resolve(d.file.fileName));
      if (!origin) return `${relative(root, d.file.fileName)}:${line + 1}: error TS${d.code}: ${text}`;
      const at = origin.lines ? origin.lines[line]?.line || `(given, sample of line ${origin.lines.find((l) => l.line)?.line})` : line + 1;
      return `${origin.source}:${at}: error TS${d.code}: ${text}`;
    });
    const blocks = modules.reduce((n, m) => n + m.blocks, 0);
    t.diagnostic(`${blocks} blocks in ${modules.length} module(s), and the consumer file, compiled`);
    assert.deepEqual(errors, [], `samples that do not compile:\n${errors.join('\n')}`);
    // The compile resolved 'delayq' to the package's declarations, not to something else.
    const resolved = program.getSourceFiles().map((f) => f.fileName).filter((f) => /[\\/]dist[\\/]index\.d\.ts$/.test(f));
    assert.equal(resolved.length, 1, "'delayq' resolves to one dist/index.d.ts");
    t.diagnostic(`'delayq' types from ${relative(root, resolved[0])}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('markers: continues joins blocks, given declares, skip needs a reason', () => {
  const md = [
    'a', '```ts', "import { DelayqClient } from 'delayq';", 'const c = 1;', '```',
    'b', '```ts', '// sample: continues', '// sample: given function f(): void', 'f();', '```',
    '```typescript', '// sample: skip wrong on purpose', 'nope(', '```',
    '```ts', 'const other = 2;', '```',
  ].join('\n');
  const modules = samplesOf('x.md', md, { onlyUsingClient: false });
  assert.equal(modules.length, 2);
  assert.deepEqual(modules[0].givens, ['declare function f(): void;']);
  assert.deepEqual(modules[0].body.map((l) => [l.line, l.text]), [[3, "import { DelayqClient } from 'delayq';"], [4, 'const c = 1;'], [10, 'f();']]);
  assert.equal(samplesOf('x.md', md, { onlyUsingClient: true }).length, 1, 'docs: only samples that use the client');
  assert.throws(() => samplesOf('y.md', '```ts\n// sample: skip\nx\n```', { onlyUsingClient: false }), /says why/);
});
