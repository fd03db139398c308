// Unit tests of the extension's logic (src/logic.ts, compiled to out/logic.js by
// `tsc -p .`), with node's test runner: `npm test`. No VS Code needed.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const { DisposableSlot, StatusModel, changedSettings, doctorCommand, render } = require('../../out/logic.js');

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
