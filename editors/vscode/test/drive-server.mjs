#!/usr/bin/env node
// Drive `lsp-assist serve` over stdio the way vscode-languageclient does, in plain node:
// initialize (with the inlineCompletion client capability), initialized, didOpen,
// textDocument/inlineCompletion, textDocument/completion, workspace/executeCommand
// (lspAssist.status, lspAssist.explainContext, lspAssist.accept when there is an item),
// shutdown, exit. Prints one JSON object on stdout; server log lines go to stderr.
//
// Exit status: 0 when every request answered without a protocol error; 1 on a
// ResponseError, a missing capability, a timeout or the server dying early; 2 on bad
// usage.
//
// Usage:
//   node test/drive-server.mjs --file PATH [--line N --character N] [--text-after TEXT]
//        [--server lsp-assist] [--server-arg serve]... [--settings JSON]
//        [--root DIR] [--timeout-ms 60000] [--change-settings JSON] [--retries N]
//        [--status-poll-ms N] [--logic out/logic.js] [--early [--opt-in] [--early-wait-ms N]]
//        [--telemetry] [--next-edit [--rename-to NAME] [--remove-param NAME]]
// --retries N asks for the inline completion again (up to N more times, 500 ms apart)
// while the answer is empty, e.g. while the model is still loading.
// --status-poll-ms N polls lspAssist.status every N ms from `initialized` until the
// server says ready or reports a model error, as the extension's status bar does
// (statusTimeline); with --logic (the compiled src/logic.ts) it also reports the
// status bar states the extension's StatusModel derives from them (statusStates).
// Without --line, the cursor goes to the end of the file.
// --early (with settings such as {"answerAfterMs": 1}; needs --status-poll-ms) checks
// early answers instead of the inline and completion requests above: an Automatic
// request gets the suggestion's start; with --opt-in (the extension's
// capabilities.experimental, from --logic's addReadyCapability) the server sends
// lspAssist/suggestionReady, which --logic's readyIgnored judges as the extension
// would, and the request the extension then makes (Automatic) gets the whole from the
// server's cache; without --opt-in no notice may come once the whole is written
// (lspAssist.status `last`). --early-wait-ms (60000) bounds the wait for either. The
// report's `early` says what happened; no start, no notice with --opt-in, or (without it)
// no whole longer than the start within the wait is an error (exit 1).
// --telemetry (needs --logic) sends, before the accept, what the extension sends per
// shown suggestion, with the params --logic builds: the second item (if any) shown and
// dismissed, then the first shown and its first word partly accepted
// (textDocument/didShowCompletion, lspAssist/didDismissCompletion,
// textDocument/didPartiallyAcceptCompletion); the report's `telemetry` lists them.
// --next-edit (needs --logic) checks next edits (textDocument/copilotInlineEdit) as the
// extension handles them, instead of the inline and completion requests: it renames the
// definition whose name is at --line/--character to --rename-to (key by key, one
// didChange per key as VS Code sends them), then, as long as the server proposes one,
// asks at the cursor, picks the edit to show with --logic's chooseNextEdit, sends
// textDocument/didShowInlineEdit, presses the key (--logic's nextEditAction: jump, then
// apply), applies the edit to its copy of the text (applyNextEdit), sends the didChange
// and runs the edit's command through workspace/executeCommand. A request with the
// version before the rename's last key must get no edits (stale). With --remove-param it
// then deletes that parameter from the definition's line and follows the deletions the
// same way. The report's `nextEdit` holds each step and the texts; no edit after the
// rename (or after the removal), a stale answer with edits, or more than 20 steps is an
// error (exit 1).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  ResponseError,
} from 'vscode-jsonrpc/node';
import {
  InitializeRequest,
  InitializedNotification,
  DidOpenTextDocumentNotification,
  DidChangeTextDocumentNotification,
  DidChangeConfigurationNotification,
  InlineCompletionRequest,
  InlineCompletionTriggerKind,
  CompletionRequest,
  CompletionTriggerKind,
  ExecuteCommandRequest,
  ShutdownRequest,
  ExitNotification,
} from 'vscode-languageserver-protocol';

const LANGUAGE_IDS = {
  '.py': 'python',
  '.js': 'javascript',
  '.jsx': 'javascriptreact',
  '.ts': 'typescript',
  '.tsx': 'typescriptreact',
  '.go': 'go',
  '.rs': 'rust',
  '.java': 'java',
  '.c': 'c',
  '.h': 'c',
  '.cpp': 'cpp',
  '.cc': 'cpp',
  '.hpp': 'cpp',
};

function usage(message) {
  process.stderr.write(`drive-server: ${message}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    file: { type: 'string' },
    line: { type: 'string' },
    character: { type: 'string' },
    server: { type: 'string', default: process.env.LSP_ASSIST_SERVER || 'lsp-assist' },
    'server-arg': { type: 'string', multiple: true },
    settings: { type: 'string', default: '{}' },
    root: { type: 'string' },
    'timeout-ms': { type: 'string', default: '120000' },
    'change-settings': { type: 'string' },
    retries: { type: 'string', default: '0' },
    'status-poll-ms': { type: 'string' },
    logic: { type: 'string' },
    early: { type: 'boolean', default: false },
    'opt-in': { type: 'boolean', default: false },
    'early-wait-ms': { type: 'string', default: '60000' },
    telemetry: { type: 'boolean', default: false },
    'next-edit': { type: 'boolean', default: false },
    'rename-to': { type: 'string', default: 'renamed' },
    'remove-param': { type: 'string' },
  },
});

if (!values.file) {
  usage('--file is required');
}
if (values['next-edit'] && !values.logic) {
  usage('--next-edit needs --logic');
}
const file = path.resolve(values.file);
const text = readFileSync(file, 'utf8');
const root = path.resolve(values.root ?? path.dirname(file));
const uri = pathToFileURL(file).href;
const languageId = LANGUAGE_IDS[path.extname(file)] ?? 'plaintext';
const lines = text.split('\n');
// LSP positions count UTF-16 code units, like JavaScript string lengths.
const line = values.line !== undefined ? Number(values.line) : lines.length - 1;
const character =
  values.character !== undefined ? Number(values.character) : (lines[line] ?? '').length;
let settings;
try {
  settings = JSON.parse(values.settings);
} catch (err) {
  usage(`--settings is not JSON: ${err.message}`);
}
const timeoutMs = Number(values['timeout-ms']);
const serverArgs = values['server-arg'] ?? ['serve'];

// A relative path names a file from here, not from the server's working folder (--root).
const server = values.server.includes('/') ? path.resolve(values.server) : values.server;
const child = spawn(server, serverArgs, {
  cwd: root,
  stdio: ['pipe', 'pipe', 'pipe'],
  env: process.env,
});
let exited = null;
let spawnError = null;
let shuttingDown = false;
let rejectOnDeath;
const death = new Promise((_, reject) => {
  rejectOnDeath = reject;
});
death.catch(() => {});
child.on('error', (err) => {
  spawnError = err;
  rejectOnDeath(new Error(`could not start ${values.server}: ${err.message}`));
});
child.on('exit', (code, signal) => {
  exited = { code, signal };
  if (!shuttingDown) {
    rejectOnDeath(new Error(`server exited early (code ${code}, signal ${signal})`));
  }
});
child.stderr.on('data', (chunk) => process.stderr.write(chunk));

const connection = createMessageConnection(
  new StreamMessageReader(child.stdout),
  new StreamMessageWriter(child.stdin),
);

const log = [];
const READY = 'lspAssist/suggestionReady';
const readyNotices = [];
let onReady = null;
connection.onNotification((method, params) => {
  if (method === READY) {
    readyNotices.push(params);
    onReady?.(params);
  } else if (method === 'window/logMessage' || method === 'window/showMessage') {
    log.push({ method, type: params?.type, message: params?.message });
    process.stderr.write(`[server ${method}] ${params?.message}\n`);
  }
});
// Requests a server may send to its client: answer them as VS Code would.
connection.onRequest('window/workDoneProgress/create', () => null);
connection.onRequest('client/registerCapability', () => null);
connection.onRequest('client/unregisterCapability', () => null);
connection.onRequest('workspace/configuration', (params) =>
  (params?.items ?? []).map((item) =>
    item.section === 'lspAssist' || item.section === undefined ? settings : null,
  ),
);
connection.onRequest('window/showMessageRequest', () => null);
connection.onRequest('workspace/workspaceFolders', () => [
  { uri: pathToFileURL(root).href, name: path.basename(root) },
]);
connection.listen();

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout after ${timeoutMs} ms: ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout, death]).finally(() => clearTimeout(timer));
}

function describe(err) {
  if (err instanceof ResponseError) {
    return { code: err.code, message: err.message, data: err.data };
  }
  return { message: err?.message ?? String(err) };
}

const report = {
  server: [values.server, ...serverArgs],
  uri,
  position: { line, character },
  errors: [],
};

async function call(name, type, params) {
  try {
    const request =
      params === undefined ? connection.sendRequest(type) : connection.sendRequest(type, params);
    const result = await withTimeout(request, name);
    return result;
  } catch (err) {
    report.errors.push({ request: name, ...describe(err) });
    return undefined;
  }
}

/** Poll lspAssist.status until ready or a model error (the status bar's loop). */
async function pollStatus(everyMs) {
  const model = logic ? new logic.StatusModel() : null;
  model?.setClientState('running');
  report.statusTimeline = [];
  report.statusStates = model ? [model.view()] : null;
  const started = Date.now();
  for (;;) {
    const result = await call('lspAssist.status', ExecuteCommandRequest.type, {
      command: 'lspAssist.status',
      arguments: [],
    });
    if (result === undefined) {
      return;
    }
    const modelInfo = result.model ?? {};
    report.statusTimeline.push({
      ms: Date.now() - started,
      ready: result.ready ?? null,
      loaded: modelInfo.loaded ?? null,
      error: modelInfo.error ?? null,
    });
    if (model) {
      model.applyStatus(result);
      const view = model.view();
      if (report.statusStates.at(-1).state !== view.state) {
        report.statusStates.push(view);
      }
    }
    if (result.ready === true || modelInfo.error || Date.now() - started > timeoutMs) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

const logic = values.logic ? createRequire(import.meta.url)(path.resolve(values.logic)) : null;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function firstText(result) {
  const items = Array.isArray(result) ? result : (result?.items ?? []);
  const text = items[0]?.insertText;
  return typeof text === 'string' ? text : (text?.value ?? null);
}

async function status() {
  return call('lspAssist.status', ExecuteCommandRequest.type, { command: 'lspAssist.status', arguments: [] });
}

/** --early: the start, then the notice (or none) and the whole from the cache. */
async function earlyCheck(position) {
  const early = { optIn: values['opt-in'], notices: readyNotices };
  report.early = early;
  let inFlight = 0;
  const marks = logic ? new logic.RefreshMarks() : null;
  let refreshed = null;
  const askAgain = new Promise((resolve) => {
    refreshed = resolve;
  });
  // What the extension does on a notice (extension.ts onSuggestionReady).
  onReady = (params) => {
    const view = { uri, version: 1, cursor: position, focused: true, inFlight: inFlight > 0 };
    const reason = logic ? logic.readyIgnored(params, view) : undefined;
    early.decision = reason ?? 'ask again';
    if (reason === undefined) {
      marks?.mark(uri, Date.now());
      refreshed(Date.now());
    }
  };
  const inline = async (name, triggerKind) => {
    inFlight += 1;
    const started = Date.now();
    const result = await call(name, InlineCompletionRequest.type, {
      textDocument: { uri },
      position,
      context: { triggerKind },
    });
    inFlight -= 1;
    return { text: firstText(result), ms: Date.now() - started, triggerKind };
  };
  // A check that cannot fail proves nothing: no start, no notice (opted in) or no whole
  // longer than the start (not opted in) is an error, and the driver exits 1.
  const fail = (message) => report.errors.push({ request: 'early', message });
  early.first = await inline('textDocument/inlineCompletion (early)', InlineCompletionTriggerKind.Automatic);
  if (!early.first.text) {
    fail('no early answer: the Automatic request got no suggestion');
  }
  // The rest takes ~0.3 s here on an idle machine; tens of seconds on a loaded one.
  const waitMs = Number(values['early-wait-ms']);
  if (values['opt-in']) {
    const noticed = await Promise.race([askAgain, sleep(waitMs).then(() => null)]);
    if (noticed === null) {
      fail(`no lspAssist/suggestionReady within ${waitMs} ms (no early answer, or the whole `
        + 'suggestion was no longer than it)');
      return;
    }
    // The middleware: the request a notice caused goes as Automatic (VS Code's trigger
    // command would make it Invoked).
    const kind = marks === null || marks.take(uri, Date.now())
      ? InlineCompletionTriggerKind.Automatic
      : InlineCompletionTriggerKind.Invoked;
    early.again = await inline('textDocument/inlineCompletion (again)', kind);
  } else {
    // No notice is coming: wait until the server wrote the whole suggestion (its last
    // outcome is the early-answered request, finished), then a little longer.
    const started = Date.now();
    for (;;) {
      const last = (await status())?.last ?? {};
      if (typeof last.text === 'string' && early.first.text !== null && last.text.length > early.first.text.length) {
        early.whole = last.text;
        break;
      }
      if (Date.now() - started > waitMs) {
        break;
      }
      await sleep(50);
    }
    if (early.whole === undefined && early.first.text) {
      fail(`no early answer: the server's whole suggestion was not longer than the first `
        + `answer within ${waitMs} ms`);
    }
    await sleep(500);
    early.noticesBeforeAgain = readyNotices.length;
    early.again = await inline('textDocument/inlineCompletion (again)', InlineCompletionTriggerKind.Automatic);
  }
  const after = await status();
  early.last = after?.last ? { cache_hit: after.last.cache_hit, text: after.last.text } : null;
  early.typethrough = after?.typethrough ?? null;
}

/** --telemetry: the notifications the extension sends, built by the compiled logic. */
async function sendTelemetry(items) {
  report.telemetry = [];
  if (!logic) {
    report.errors.push({ request: 'telemetry', message: '--telemetry needs --logic' });
    return;
  }
  const send = async (method, params) => {
    if (params) {
      report.telemetry.push({ method, params });
      await connection.sendNotification(method, params);
    }
  };
  const [first, second] = items;
  if (second) {
    await send(logic.DID_SHOW, logic.shownParams(second));
    await send(logic.DID_DISMISS, logic.dismissParams(second));
  }
  if (first) {
    await send(logic.DID_SHOW, logic.shownParams(first));
    const word = /^\W*\w+/.exec(first.insertText)?.[0] ?? '';
    await send(logic.DID_PARTIALLY_ACCEPT, logic.partialParams(first, word.length));
  }
}

/** --next-edit: rename a definition, then follow the next edits as the extension does. */
async function nextEditCheck(capabilities, position) {
  const fail = (message) => report.errors.push({ request: 'next edit', message });
  const out = { offered: logic.nextEditOffered(capabilities), shownNotifications: 0 };
  report.nextEdit = out;
  if (!out.offered) {
    fail(`the server does not list ${logic.NEXT_EDIT_ACCEPT}`);
    return;
  }
  let current = text;
  let version = 1;
  let cursor = { ...position };
  const change = async (range, newText) => {
    current = logic.applyNextEdit(current, { range, text: newText });
    version += 1;
    await connection.sendNotification(DidChangeTextDocumentNotification.type, {
      textDocument: { uri, version },
      contentChanges: [{ range, text: newText }],
    });
  };
  const ask = (v) =>
    call(logic.NEXT_EDIT_METHOD, logic.NEXT_EDIT_METHOD, logic.nextEditParams(uri, v, cursor));
  const lineOf = (at) => current.split('\n')[at];
  /** Ask, show, jump, apply, accept until the server proposes nothing; the steps. */
  const follow = async () => {
    const steps = [];
    for (;;) {
      // The extension asks 150 ms after the last change.
      await sleep(150);
      const answer = await ask(version);
      const edit = logic.chooseNextEdit(answer, uri, version);
      if (!edit) {
        return steps;
      }
      if (steps.length >= 20) {
        fail('more than 20 next edits in a row');
        return steps;
      }
      const step = {
        version,
        proposed: answer.edits.length,
        edit: { range: edit.range, text: edit.text, command: edit.command },
        view: logic.nextEditView(edit),
        cursorBefore: { ...cursor },
        lineBefore: lineOf(edit.range.start.line),
        keys: [],
      };
      steps.push(step);
      await connection.sendNotification(logic.DID_SHOW_NEXT_EDIT, { item: edit });
      out.shownNotifications += 1;
      // The key, pressed until it applies (a jump first unless the cursor is there).
      for (let press = 0; press < 3; press++) {
        const action = logic.nextEditAction(cursor, edit);
        step.keys.push(action);
        if (action === 'apply') {
          break;
        }
        cursor = { ...edit.range.start };
      }
      if (step.keys.at(-1) !== 'apply') {
        fail('the key never applied the edit');
        return steps;
      }
      await change(edit.range, edit.text);
      cursor = { ...edit.range.start };
      step.lineAfter = lineOf(edit.range.start.line);
      step.accept = await call(edit.command.command, ExecuteCommandRequest.type, {
        command: edit.command.command,
        arguments: edit.command.arguments ?? [],
      });
    }
  };

  // Rename the definition at the cursor: select the name, then type the new one.
  const line = lineOf(position.line);
  const word = /^\w+/.exec(line.slice(position.character))?.[0] ?? '';
  const start = position.character - (/\w*$/.exec(line.slice(0, position.character))?.[0].length ?? 0);
  const from = line.slice(start, position.character) + word;
  const to = values['rename-to'];
  out.rename = { from, to, line: position.line };
  cursor = { line: position.line, character: start };
  for (const [i, ch] of [...to].entries()) {
    const end = i === 0 ? start + from.length : start + i;
    await change({ start: { line: position.line, character: start + i }, end: { line: position.line, character: end } }, ch);
    cursor = { line: position.line, character: start + i + 1 };
  }
  out.rename.definition = lineOf(position.line);
  // Stale: the version before the last key, asked when the current one has edits.
  await sleep(150);
  const staleAnswer = await ask(version - 1);
  out.stale = { version: version - 1, current: version, answer: staleAnswer ?? null };
  if (!staleAnswer || staleAnswer.edits?.length !== 0) {
    fail(`a stale request (version ${version - 1}, the document is at ${version}) got edits`);
  }
  out.rename.steps = await follow();
  out.rename.text = current;
  if (out.rename.steps.length === 0) {
    fail(`no next edit after renaming ${from} to ${to}`);
  }

  const param = values['remove-param'];
  if (param) {
    // Remove the parameter from the definition's line (with its comma), one change.
    const def = lineOf(position.line);
    const match = new RegExp(`,\\s*${param}\\b|\\b${param}\\s*,\\s*`).exec(def);
    out.deletion = { param };
    if (!match) {
      fail(`no parameter ${param} on line ${position.line}: ${def}`);
      return;
    }
    const at = (character) => ({ line: position.line, character });
    await change({ start: at(match.index), end: at(match.index + match[0].length) }, '');
    cursor = at(match.index);
    out.deletion.definition = lineOf(position.line);
    out.deletion.steps = await follow();
    out.deletion.text = current;
    if (out.deletion.steps.length === 0) {
      fail(`no next edit after removing the parameter ${param}`);
    }
  }
  out.final = current;
  out.stats = await call('lspAssist.nextEditStats', ExecuteCommandRequest.type, {
    command: 'lspAssist.nextEditStats',
    arguments: [],
  });
}

async function main() {
  const capabilities = {
    general: { positionEncodings: ['utf-16'] },
    workspace: {
      configuration: true,
      didChangeConfiguration: { dynamicRegistration: true },
      executeCommand: { dynamicRegistration: true },
      workspaceFolders: true,
    },
    textDocument: {
      synchronization: { dynamicRegistration: true, didSave: true, willSave: false },
      completion: {
        dynamicRegistration: true,
        completionItem: { snippetSupport: false, insertReplaceSupport: false },
        contextSupport: true,
      },
      inlineCompletion: { dynamicRegistration: true },
    },
    window: { workDoneProgress: true },
  };
  if (values['opt-in']) {
    // What the extension's StaticFeature adds (fillClientCapabilities).
    if (logic) {
      logic.addReadyCapability(capabilities);
    } else {
      capabilities.experimental = { lspAssistSuggestionReady: true };
    }
  }
  report.sentExperimental = capabilities.experimental ?? null;
  const init = await call('initialize', InitializeRequest.type, {
    processId: process.pid,
    clientInfo: { name: 'lsp-assist drive-server.mjs', version: '0.1.0' },
    rootUri: pathToFileURL(root).href,
    workspaceFolders: [{ uri: pathToFileURL(root).href, name: path.basename(root) }],
    initializationOptions: settings,
    capabilities,
  });
  if (!init) {
    throw new Error('initialize failed');
  }
  report.serverInfo = init.serverInfo ?? null;
  report.capabilities = init.capabilities;
  await connection.sendNotification(InitializedNotification.type, {});
  if (values['status-poll-ms']) {
    await pollStatus(Number(values['status-poll-ms']));
  }
  await connection.sendNotification(DidOpenTextDocumentNotification.type, {
    textDocument: { uri, languageId, version: 1, text },
  });

  if (values['change-settings']) {
    await connection.sendNotification(DidChangeConfigurationNotification.type, {
      settings: JSON.parse(values['change-settings']),
    });
  }

  const position = { line, character };
  if (!init.capabilities?.inlineCompletionProvider) {
    report.errors.push({ request: 'initialize', message: 'no inlineCompletionProvider' });
  }
  if (values['next-edit']) {
    await nextEditCheck(init.capabilities, position);
    shuttingDown = true;
    await call('shutdown', ShutdownRequest.type, undefined);
    await connection.sendNotification(ExitNotification.type);
    return;
  }
  if (values.early) {
    await earlyCheck(position);
    shuttingDown = true;
    await call('shutdown', ShutdownRequest.type, undefined);
    await connection.sendNotification(ExitNotification.type);
    return;
  }
  const retries = Number(values.retries);
  let inline;
  let items = [];
  report.inlineAttempts = [];
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (attempt > 0) {
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const started = Date.now();
    inline = await call('textDocument/inlineCompletion', InlineCompletionRequest.type, {
      textDocument: { uri },
      position,
      context: { triggerKind: InlineCompletionTriggerKind.Invoked },
    });
    // The result is InlineCompletionItem[] | InlineCompletionList | null.
    items = Array.isArray(inline) ? inline : (inline?.items ?? []);
    report.inlineAttempts.push({ ms: Date.now() - started, items: items.length });
    if (items.length > 0 || inline === undefined) {
      break;
    }
  }
  report.inlineCompletion = inline ?? null;
  report.inlineItems = items;

  if (init.capabilities?.completionProvider) {
    const completion = await call('textDocument/completion', CompletionRequest.type, {
      textDocument: { uri },
      position,
      context: { triggerKind: CompletionTriggerKind.Invoked },
    });
    report.completion = completion ?? null;
  }

  const commands = init.capabilities?.executeCommandProvider?.commands ?? [];
  report.commands = commands;
  if (commands.includes('lspAssist.status')) {
    report.status = await call('lspAssist.status', ExecuteCommandRequest.type, {
      command: 'lspAssist.status',
      arguments: [],
    });
  }
  if (commands.includes('lspAssist.explainContext')) {
    // Without a model the server answers explain with RequestFailed (-32803), the
    // answer the extension shows as an error message: reported apart, not a failure.
    try {
      report.explainContext = await withTimeout(
        connection.sendRequest(ExecuteCommandRequest.type, {
          command: 'lspAssist.explainContext',
          arguments: [uri, line, character],
        }),
        'lspAssist.explainContext',
      );
    } catch (err) {
      const described = describe(err);
      if (described.code === -32803) {
        report.explainError = described;
      } else {
        report.errors.push({ request: 'lspAssist.explainContext', ...described });
      }
    }
  }
  if (values.telemetry) {
    await sendTelemetry(items);
  }
  // Report the acceptance as VS Code does: it runs the command of the accepted item.
  const accepted = items.find((item) => item.command?.command);
  if (accepted) {
    report.accept = await call('lspAssist.accept', ExecuteCommandRequest.type, {
      command: accepted.command.command,
      arguments: accepted.command.arguments ?? [],
    });
    report.acceptSent = true;
  } else {
    report.acceptSent = false;
  }

  shuttingDown = true;
  await call('shutdown', ShutdownRequest.type, undefined);
  await connection.sendNotification(ExitNotification.type);
}

let failed = false;
try {
  await main();
} catch (err) {
  report.errors.push({ request: 'driver', ...describe(err) });
}
report.log = log;

// Give the server a moment to exit after `exit`, then make sure it is gone.
const deadline = Date.now() + 5000;
while (exited === null && !spawnError && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
if (exited === null && !spawnError) {
  child.kill('SIGKILL');
  report.serverExit = { killed: true };
} else {
  report.serverExit = exited;
}
failed = report.errors.length > 0;
connection.dispose();
process.stdout.write(JSON.stringify(report, null, 2) + '\n');
process.exit(failed ? 1 : 0);
