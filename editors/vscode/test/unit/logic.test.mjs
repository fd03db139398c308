// Unit tests of the extension's logic (src/logic.ts, compiled to out/logic.js by
// `tsc -p .`), with node's test runner: `npm test`. No VS Code needed.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const {
  DisposableSlot,
  InFlight,
  READY_CAPABILITY,
  READY_NOTIFICATION,
  RefreshMarks,
  StatusModel,
  addReadyCapability,
  changedSettings,
  cursorMoved,
  doctorCommand,
  readyIgnored,
  render,
} = require('../../out/logic.js');

/** An event source like LanguageClient.onDidChangeState: counts live listeners. */
function emitter() {
  const listeners = new Set();
  return {
    listeners,
    on(listener) {
      listeners.add(listener);
      return { dispose: () => listeners.delete(listener) };
    },
    fire(value) {
      for (const listener of listeners) listener(value);
    },
  };
}

test('a restart disposes the previous client listener', () => {
  const slot = new DisposableSlot();
  const first = emitter();
  const second = emitter();
  const seen = [];
  slot.set(first.on((state) => seen.push(['first', state])));
  slot.set(second.on((state) => seen.push(['second', state])));
  assert.equal(first.listeners.size, 0);
  assert.equal(second.listeners.size, 1);
  first.fire('running');
  second.fire('running');
  assert.deepEqual(seen, [['second', 'running']]);
  slot.clear();
  assert.equal(second.listeners.size, 0);
  assert.equal(slot.size, 0);
});

test('a listener whose dispose throws does not keep the others alive', () => {
  const slot = new DisposableSlot();
  const live = emitter();
  slot.set({ dispose: () => { throw new Error('gone'); } }, live.on(() => {}));
  slot.clear();
  assert.equal(live.listeners.size, 0);
});

test('status: starting, loading until lspAssist.status says ready, then ready', () => {
  const status = new StatusModel();
  assert.equal(status.state, 'stopped');
  status.setClientState('starting');
  assert.equal(status.state, 'starting');
  status.setClientState('running');
  // Running but not yet asked: the model may still be loading, so not "ready".
  assert.equal(status.state, 'loading');
  assert.equal(status.needsPolling(), true);
  status.applyStatus({ initialized: true, ready: false, model: { loaded: false, error: null, path: '/m.gguf' } });
  assert.equal(status.state, 'loading');
  assert.match(status.view().text, /loading/);
  assert.match(status.view().tooltip, /\/m\.gguf/);
  assert.equal(status.needsPolling(), true);
  status.applyStatus({ initialized: true, ready: true, model: { loaded: true, error: null, path: '/m.gguf' } });
  assert.equal(status.state, 'ready');
  assert.equal(status.needsPolling(), false);
  assert.equal(status.view().text, '$(sparkle) lsp-assist');
});

test('status: a model that failed to load is an error, and polling stops', () => {
  const status = new StatusModel();
  status.setClientState('running');
  status.applyStatus({ initialized: true, ready: true, model: { loaded: false, error: 'no such file: /x.gguf' } });
  assert.equal(status.state, 'error');
  assert.equal(status.needsPolling(), false);
  assert.equal(status.view().text, '$(error) lsp-assist: error');
  assert.match(status.view().tooltip, /no such file: \/x\.gguf/);
});

test('status: thinking while requests are out, then the last latency', () => {
  const status = new StatusModel();
  status.setClientState('running');
  status.applyStatus({ initialized: true, ready: true, model: { loaded: true } });
  status.requestStarted();
  status.requestStarted();
  assert.equal(status.state, 'thinking');
  status.requestFinished(40);
  assert.equal(status.state, 'thinking');
  status.requestFinished(123.4);
  assert.equal(status.state, 'ready');
  assert.equal(status.view().text, '$(sparkle) lsp-assist 123 ms');
  // A failed request shows as an error until one succeeds.
  status.requestStarted();
  status.requestFinished(5, 'Internal error');
  assert.equal(status.state, 'error');
  assert.match(status.view().tooltip, /Internal error/);
  status.requestStarted();
  status.requestFinished(7);
  assert.equal(status.state, 'ready');
});

test('status: a server without the ready field counts initialized as ready', () => {
  const status = new StatusModel();
  status.setClientState('running');
  status.applyStatus({ initialized: true });
  assert.equal(status.state, 'ready');
});

test('status: a start failure stays an error after the client stops', () => {
  const status = new StatusModel();
  status.setClientState('starting');
  status.setClientState('stopped', 'could not start the server (spawn lsp-assist ENOENT)');
  assert.equal(status.state, 'error');
  assert.match(status.view().tooltip, /ENOENT/);
  status.setClientState('starting');
  assert.equal(status.state, 'starting');
});

test('status: a settings change polls again until ready', () => {
  const status = new StatusModel();
  status.setClientState('running');
  status.applyStatus({ initialized: true, ready: true, model: {} });
  assert.equal(status.needsPolling(), false);
  status.expectReload();
  assert.equal(status.needsPolling(), true);
});

test('changedSettings sends changed keys and the default of removed ones', () => {
  const defaults = { maxTokens: 48, contextBudget: 1024 };
  const changed = changedSettings(
    { maxTokens: 10, contextBudget: 512, draft: 'off' },
    { maxTokens: 10, contextBudget: 256, gpuLayers: 99 },
    (key) => defaults[key],
  );
  // draft has no declared default (an extraSettings key): nothing to send for it.
  assert.deepEqual(changed, { contextBudget: 256, gpuLayers: 99 });
  assert.deepEqual(changedSettings({ maxTokens: 10 }, {}, (key) => defaults[key]), { maxTokens: 48 });
  assert.deepEqual(changedSettings({ a: [1, 2] }, { a: [1, 2] }, () => undefined), {});
});

test('render: Markdown text first, the rest as JSON; else JSON', () => {
  assert.deepEqual(render('# hi'), { text: '# hi', language: 'markdown' });
  const explained = render({ text: 'layers', tokens: 3 });
  assert.equal(explained.language, 'markdown');
  assert.ok(explained.text.startsWith('layers\n\n```json\n'));
  assert.match(explained.text, /"tokens": 3/);
  assert.deepEqual(render({ ready: true }), { text: '{\n  "ready": true\n}', language: 'json' });
});

test('doctorCommand replaces serve and what follows it with doctor', () => {
  assert.deepEqual(doctorCommand('lsp-assist', ['serve']), { command: 'lsp-assist', args: ['doctor'] });
  assert.deepEqual(doctorCommand('/usr/bin/python3', ['-m', 'lsp_assist.cli.main', 'serve', '--log-level', 'debug']), {
    command: '/usr/bin/python3',
    args: ['-m', 'lsp_assist.cli.main', 'doctor'],
  });
  assert.deepEqual(doctorCommand('', []), { command: 'lsp-assist', args: ['doctor'] });
});

test('the opt-in to lspAssist/suggestionReady keeps other experimental capabilities', () => {
  assert.equal(READY_NOTIFICATION, 'lspAssist/suggestionReady');
  const bare = {};
  addReadyCapability(bare);
  assert.deepEqual(bare, { experimental: { lspAssistSuggestionReady: true } });
  const other = { textDocument: {}, experimental: { snippetTextEdit: true } };
  addReadyCapability(other);
  assert.deepEqual(other.experimental, { snippetTextEdit: true, [READY_CAPABILITY]: true });
  const odd = { experimental: [1] };
  addReadyCapability(odd);
  assert.deepEqual(odd.experimental, { lspAssistSuggestionReady: true });
});

test('readyIgnored: a notice for the cursor, or before it on the way typed, asks again', () => {
  const uri = 'file:///ws/main.py';
  const notice = { textDocument: { uri, version: 3 }, position: { line: 15, character: 14 } };
  const view = { uri, version: 3, cursor: { line: 15, character: 14 }, focused: true, inFlight: false };
  assert.equal(readyIgnored(notice, view), undefined);
  // Typed into it: later on the line, or on a later line.
  assert.equal(readyIgnored(notice, { ...view, version: 5, cursor: { line: 15, character: 16 } }), undefined);
  assert.equal(readyIgnored(notice, { ...view, cursor: { line: 16, character: 0 } }), undefined);
  // Not version-checked when the server sends none.
  assert.equal(readyIgnored({ ...notice, textDocument: { uri } }, view), undefined);
});

test('readyIgnored: other documents, places, selections, requests out are ignored', () => {
  const uri = 'file:///ws/main.py';
  const notice = { textDocument: { uri, version: 3 }, position: { line: 15, character: 14 } };
  const view = { uri, version: 3, cursor: { line: 15, character: 14 }, focused: true, inFlight: false };
  const cases = [
    [null, view, 'malformed'],
    [{ position: notice.position }, view, 'malformed'],
    [{ textDocument: { uri }, position: { line: 1 } }, view, 'malformed'],
    [notice, { ...view, uri: undefined }, 'no active editor'],
    [notice, { ...view, uri: 'file:///ws/helpers.py' }, 'not the current document'],
    [notice, { ...view, version: 2 }, 'a newer document than the editor has'],
    [notice, { ...view, focused: false }, 'the window is not focused'],
    [notice, { ...view, cursor: undefined }, 'a selection'],
    [notice, { ...view, inFlight: true }, 'a request is in flight'],
    [notice, { ...view, cursor: { line: 15, character: 13 } }, 'another place'],
    [notice, { ...view, cursor: { line: 14, character: 40 } }, 'another place'],
  ];
  for (const [params, seen, reason] of cases) {
    assert.equal(readyIgnored(params, seen), reason, JSON.stringify([params, seen]));
  }
});

test('InFlight counts requests per document; RefreshMarks are taken once, while fresh', () => {
  const out = new InFlight();
  out.start('a');
  out.start('a');
  out.end('a');
  assert.equal(out.has('a'), true);
  out.end('a');
  assert.equal(out.has('a'), false);
  out.end('b'); // an end without a start leaves nothing behind
  assert.equal(out.has('b'), false);
  const marks = new RefreshMarks(2000);
  marks.mark('a', 1000);
  assert.equal(marks.take('b', 1100), false);
  assert.equal(marks.take('a', 1100), true);
  assert.equal(marks.take('a', 1200), false);
  marks.mark('a', 1000);
  assert.equal(marks.take('a', 3001), false);
});

test('telemetry params: shown, partly accepted (UTF-16 units), dismissed', () => {
  const {
    DID_DISMISS,
    DID_PARTIALLY_ACCEPT,
    DID_SHOW,
    dismissParams,
    itemId,
    partialParams,
    shownParams,
  } = require('../../out/logic.js');
  assert.equal(DID_SHOW, 'textDocument/didShowCompletion');
  assert.equal(DID_PARTIALLY_ACCEPT, 'textDocument/didPartiallyAcceptCompletion');
  assert.equal(DID_DISMISS, 'lspAssist/didDismissCompletion');
  const item = {
    insertText: "'😀' + name",
    range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } },
    command: { title: 'Accept suggestion', command: 'lspAssist.accept', arguments: ['3f2a.1'] },
  };
  assert.equal(itemId(item), '3f2a.1');
  assert.deepEqual(shownParams(item), { item });
  assert.equal(shownParams({ insertText: 'x' }), undefined, 'no command: nothing to name');
  assert.equal(shownParams({ insertText: 'x', command: { command: 'c', arguments: [7] } }), undefined);
  assert.equal(item.insertText.length, 11, 'the emoji counts two UTF-16 units');
  assert.deepEqual(partialParams(item, 4), { item, acceptedLength: 4 });
  assert.equal(partialParams(item, 0), undefined);
  assert.equal(partialParams(item, 11), undefined, 'all of it: the accept command says so');
  assert.equal(partialParams(item, 2.5), undefined);
  assert.deepEqual(dismissParams(item), { item: { command: item.command } });
  assert.equal(dismissParams(undefined), undefined);
});

// Next edits: an answer of copilotInlineEdit as the server sends it.
const URI = 'file:///ws/shapes.py';
function nextEdit(line, character, length, text, uri = URI, version = 8) {
  return {
    text,
    textDocument: { uri, version },
    range: { start: { line, character }, end: { line, character: character + length } },
    command: {
      title: 'Accept next edit',
      command: 'github.copilot.didAcceptNextEditSuggestionItem',
      arguments: [`id-${line}`],
    },
    explain: { kind: 'rename', reason: 'renamed' },
  };
}

test('next edits: asked with the document version; offered when the accept command is listed', () => {
  const { NEXT_EDIT_ACCEPT, NEXT_EDIT_METHOD, DID_SHOW_NEXT_EDIT, nextEditOffered, nextEditParams } =
    require('../../out/logic.js');
  assert.equal(NEXT_EDIT_METHOD, 'textDocument/copilotInlineEdit');
  assert.equal(DID_SHOW_NEXT_EDIT, 'textDocument/didShowInlineEdit');
  assert.deepEqual(nextEditParams(URI, 3, { line: 4, character: 11 }), {
    textDocument: { uri: URI, version: 3 },
    position: { line: 4, character: 11 },
  });
  const caps = (commands) => ({ executeCommandProvider: { commands } });
  assert.equal(nextEditOffered(caps(['lspAssist.accept', NEXT_EDIT_ACCEPT])), true);
  assert.equal(nextEditOffered(caps(['lspAssist.accept'])), false, "the server's nextEdit is off");
  assert.equal(nextEditOffered({}), false);
  assert.equal(nextEditOffered(undefined), false);
});

test('chooseNextEdit: the first edit of this document at its version; none when stale', () => {
  const { chooseNextEdit } = require('../../out/logic.js');
  const other = nextEdit(0, 0, 4, 'surface', 'file:///ws/other.py');
  const above = nextEdit(1, 10, 4, 'surface');
  const below = nextEdit(9, 15, 4, 'surface');
  assert.equal(chooseNextEdit({ edits: [other, above, below] }, URI, 8), above);
  assert.equal(chooseNextEdit({ edits: [above, below] }, URI, 9), undefined, 'the document is newer');
  assert.equal(chooseNextEdit({ edits: [] }, URI, 8), undefined);
  assert.equal(chooseNextEdit({ edits: [other] }, URI, 8), undefined);
  assert.equal(chooseNextEdit(null, URI, 8), undefined);
  assert.equal(chooseNextEdit({ edits: 'x' }, URI, 8), undefined);
  const noRange = { ...above, range: { start: { line: 1 } } };
  assert.equal(chooseNextEdit({ edits: [noRange, below] }, URI, 8), below, 'a malformed edit is skipped');
});

test('nextEditAction: the key jumps to the edit, and applies it with the cursor at its start', () => {
  const { nextEditAction } = require('../../out/logic.js');
  const edit = nextEdit(1, 10, 4, 'surface');
  assert.equal(nextEditAction({ line: 4, character: 11 }, edit), 'jump', 'below it');
  assert.equal(nextEditAction({ line: 1, character: 12 }, edit), 'jump', 'on its line, elsewhere');
  assert.equal(nextEditAction({ line: 1, character: 10 }, edit), 'apply');
});

test('nextEditView: new text after the range and a hint; a deletion struck through', () => {
  const { nextEditView } = require('../../out/logic.js');
  const rename = nextEdit(1, 10, 4, 'surface');
  assert.deepEqual(nextEditView(rename), {
    range: rename.range,
    deletion: false,
    after: 'surface',
    hint: 'next edit (Tab)',
  });
  const deletion = nextEdit(9, 27, 3, '');
  assert.deepEqual(nextEditView(deletion), {
    range: deletion.range,
    deletion: true,
    after: undefined,
    hint: 'next edit: delete (Tab)',
  });
  assert.equal(nextEditView(nextEdit(2, 0, 0, 'x = 1\ny = 2\n')).after, 'x = 1 …', 'first line only');
  assert.equal(nextEditView(rename, 'Ctrl+Enter').hint, 'next edit (Ctrl+Enter)');
});

test('applyNextEdit: replaces, deletes and inserts at LSP positions (UTF-16 units)', () => {
  const { applyNextEdit, offsetAt } = require('../../out/logic.js');
  const text = 'def main():\n    print(area(2, 3))\n\nprint(area(2, 3, 4))\n';
  assert.equal(
    applyNextEdit(text, nextEdit(1, 10, 4, 'surface')),
    'def main():\n    print(surface(2, 3))\n\nprint(area(2, 3, 4))\n',
  );
  assert.equal(applyNextEdit(text, nextEdit(3, 15, 3, '')), text.replace(', 3, 4', ', 3'));
  const across = { range: { start: { line: 0, character: 11 }, end: { line: 2, character: 0 } }, text: '' };
  assert.equal(applyNextEdit(text, across), 'def main():\nprint(area(2, 3, 4))\n');
  assert.equal(applyNextEdit(text, nextEdit(4, 0, 0, 'main()\n')), text + 'main()\n', 'at the end');
  const emoji = "s = '😀'; area(1)\n";
  assert.equal(offsetAt(emoji, { line: 0, character: 10 }), 10, 'the emoji counts two units');
  assert.equal(applyNextEdit(emoji, nextEdit(0, 10, 4, 'surface')), "s = '😀'; surface(1)\n");
  assert.equal(offsetAt('ab\ncd', { line: 0, character: 99 }), 2, 'past the end of a line: its end');
  assert.equal(offsetAt('ab\ncd', { line: 5, character: 0 }), 5, 'past the last line: the end');
});

test('cursorMoved: a move reports once per place, an edit cancels, a selection does not', () => {
  const at = (line, character, version = 1, uri = 'file:///a.py') => ({ uri, version, line, character });
  assert.equal(cursorMoved(undefined, undefined, at(3, 0), true), 'report');
  assert.equal(cursorMoved(at(3, 0), at(3, 0), at(3, 0), true), 'none');
  assert.equal(cursorMoved(at(3, 0), at(3, 0), at(9, 4), true), 'report');
  // typing: the version moved since the selection seen last
  assert.equal(cursorMoved(at(3, 0), at(3, 0), at(3, 1, 2), true), 'cancel');
  // another document at another version is a move, not an edit
  assert.equal(cursorMoved(at(3, 0), at(3, 0), at(3, 0, 5, 'file:///b.py'), true), 'report');
  assert.equal(cursorMoved(at(3, 0), undefined, at(4, 0), false), 'none');
});
