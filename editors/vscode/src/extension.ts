// VS Code client of the lsp-assist language server.
//
// The server does the work: it answers textDocument/inlineCompletion (LSP 3.18), which
// vscode-languageclient 11 turns into VS Code's inline (ghost text) suggestions. Each
// inline item carries `command` = lspAssist.accept, which vscode-languageclient
// registered as a VS Code command (it registers every command the server lists in
// executeCommandProvider), so accepting a suggestion reports the acceptance to the
// server. That is also why this extension's own commands use other ids
// (lspAssist.showStatus, lspAssist.showExplainContext): registering lspAssist.status
// here would collide with the one the client registers for the server.
//
// The status bar item polls lspAssist.status while the model loads (loading, ready,
// error) and shows requests in flight (thinking) and the last latency.
//
// Early answers: the client opts in to lspAssist/suggestionReady (an experimental
// capability, set by a StaticFeature). The server sends it when the whole of a
// suggestion it answered early (only its start) is in its cache; if the notice is for
// the active editor, at or before its cursor, and no inline request is out, the
// extension runs editor.action.inlineSuggest.trigger, and the middleware sends that one
// request as Automatic (the cache answers those; Invoked asks the model for
// alternatives). VS Code replaces the ghost text with the longer one.
//
// Acceptance per shown suggestion: VS Code's stable API says neither that an item shows
// nor that the user took part of one. The middleware sends
// textDocument/didShowCompletion for the first item of an answer VS Code gets (the one it
// shows when it fits); the extension's own commands behind Ctrl+Right and Escape (while a
// suggestion shows) run VS Code's accept-next-word and hide, then send
// textDocument/didPartiallyAcceptCompletion (the UTF-16 offset from the item's start to
// the cursor) and lspAssist/didDismissCompletion.
//
// Next edits (issue 22): after a change (150 ms after the last one) or on
// lspAssist.nextEdit, the extension asks textDocument/copilotInlineEdit at the cursor and
// shows the first edit of the document at its version with decorations (the replaced
// range highlighted, or struck through for a deletion; the new text after it; a hint at
// the end of its line), then sends textDocument/didShowInlineEdit. Tab
// (lspAssist.nextEditJumpOrApply, while lspAssist.nextEditVisible) moves the cursor to
// it, and again applies it and runs its command through workspace/executeCommand
// (github.copilot.didAcceptNextEditSuggestionItem); the change asks for the next one.
// Escape or any other change removes it.
//
// The logic that needs no VS Code lives in logic.ts, with unit tests.

import { execFile } from 'node:child_process';
import * as vscode from 'vscode';
import {
  ClientCapabilities,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  StaticFeature,
  TransportKind,
} from 'vscode-languageclient/node';

import {
  ClientState,
  CursorPlace,
  DID_DISMISS,
  DID_MOVE_CURSOR,
  DID_PARTIALLY_ACCEPT,
  DID_SHOW,
  DisposableSlot,
  EditorView,
  DID_SHOW_NEXT_EDIT,
  InFlight,
  LANGUAGES,
  LAUNCH_KEYS,
  NEXT_EDIT_METHOD,
  NextEdit,
  READY_NOTIFICATION,
  RefreshMarks,
  SERVER_KEYS,
  StatusModel,
  WireItem,
  addReadyCapability,
  changedSettings,
  chooseNextEdit,
  cursorMoved,
  dismissParams,
  doctorCommand,
  itemId,
  nextEditAction,
  nextEditOffered,
  nextEditParams,
  nextEditView,
  partialParams,
  readyIgnored,
  render,
  shownParams,
} from './logic';

export { LANGUAGES };

const SECTION = 'lspAssist';
const POLL_MS = 1000;

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel | undefined;
let statusItem: vscode.StatusBarItem | undefined;
let lastSent: Record<string, unknown> = {};
const status = new StatusModel();
/** Listeners on the current client; a restart disposes them with the client. */
const clientListeners = new DisposableSlot();
let pollTimer: NodeJS.Timeout | undefined;
/** Inline requests out per document, and the documents whose next one a notice caused. */
const inFlight = new InFlight();
const refreshMarks = new RefreshMarks();
/** The item last reported shown: its document and where its text starts. */
let lastShown: { item: WireItem; uri: string; start: vscode.Position } | undefined;

/** How long the cursor rests before the server is told where (lspAssist/didMoveCursor). */
let cursorTimer: NodeJS.Timeout | undefined;
/** The cursor at the last selection event, and the place last reported. */
let cursorSeen: CursorPlace | undefined;
let cursorReported: CursorPlace | undefined;

const NEXT_EDIT_DEBOUNCE_MS = 150;
const NEXT_EDIT_VISIBLE = 'lspAssist.nextEditVisible';
/** The next edit on screen: the editor it is drawn in, at the document's version then. */
let shownNextEdit: { edit: NextEdit; editor: vscode.TextEditor; version: number } | undefined;
let nextEditTimer: NodeJS.Timeout | undefined;
let nextEditRequest: vscode.CancellationTokenSource | undefined;
let nextEditDecorations: Record<'range' | 'deletion' | 'text' | 'hint', vscode.TextEditorDecorationType> | undefined;

/** Opts in to lspAssist/suggestionReady (capabilities.experimental). */
class SuggestionReadyFeature implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    addReadyCapability(capabilities);
  }

  initialize(): void {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {}
}

function isSet(config: vscode.WorkspaceConfiguration, key: string): boolean {
  const info = config.inspect(key);
  if (!info) {
    return false;
  }
  return (
    info.globalValue !== undefined ||
    info.workspaceValue !== undefined ||
    info.workspaceFolderValue !== undefined ||
    info.globalLanguageValue !== undefined ||
    info.workspaceLanguageValue !== undefined ||
    info.workspaceFolderLanguageValue !== undefined
  );
}

/**
 * The settings the user set explicitly, as the server's flat camelCase keys.
 *
 * Keys left at their default are not sent, so the server keeps its own defaults and
 * its environment overrides (LSP_ASSIST_MODEL_PATH ...).
 */
export function serverSettings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const settings: Record<string, unknown> = {};
  const extra = config.get<Record<string, unknown>>('extraSettings') ?? {};
  if (extra && typeof extra === 'object' && !Array.isArray(extra)) {
    Object.assign(settings, extra);
  }
  for (const key of SERVER_KEYS) {
    if (isSet(config, key)) {
      settings[key] = config.get(key);
    }
  }
  return settings;
}

function launch(): { command: string; args: string[] } {
  const config = vscode.workspace.getConfiguration(SECTION);
  return {
    command: config.get<string>('serverPath') || 'lsp-assist',
    args: config.get<string[]>('serverArgs') ?? ['serve'],
  };
}

function serverOptions(): ServerOptions {
  const { command, args } = launch();
  return {
    run: { command, args, transport: TransportKind.stdio },
    debug: { command, args, transport: TransportKind.stdio },
  };
}

function clientOptions(): LanguageClientOptions {
  const documentSelector = LANGUAGES.flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
  return {
    documentSelector,
    initializationOptions: serverSettings(),
    outputChannel: output,
    middleware: {
      // The server also answers textDocument/completion with one item carrying the
      // suggestion (detail "lsp-assist (AI suggestion)") for editors without inline
      // completion. VS Code shows the same suggestion as ghost text, so the item is
      // hidden unless asked for.
      provideCompletionItem: (document, position, context, token, next) => {
        if (!vscode.workspace.getConfiguration(SECTION).get<boolean>('completionItems')) {
          return [];
        }
        return next(document, position, context, token);
      },
      // Thinking while a request is out, and the latency of the last one.
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const started = Date.now();
        const uri = document.uri.toString();
        const refresh = refreshMarks.take(uri, started);
        if (refresh) {
          // Asked again after lspAssist/suggestionReady: the cache answers Automatic.
          context = { ...context, triggerKind: vscode.InlineCompletionTriggerKind.Automatic };
        }
        // A refresh's latency is the cache's; the status bar keeps the one waited for.
        const shownLatency = status.latencyMs;
        inFlight.start(uri);
        status.requestStarted();
        updateStatusItem();
        try {
          const result = await next(document, position, context, token);
          status.requestFinished(Date.now() - started);
          if (!token.isCancellationRequested) {
            reportShown(document, position, result);
          }
          if (refresh) {
            status.latencyMs = shownLatency;
          }
          return result;
        } catch (err) {
          const cancelled = token.isCancellationRequested;
          status.requestFinished(Date.now() - started, cancelled ? undefined : String(err));
          throw err;
        } finally {
          inFlight.end(uri);
          updateStatusItem();
        }
      },
    },
  };
}

/** didShowCompletion for the first item of an answer (the one VS Code shows if it fits). */
function reportShown(
  document: vscode.TextDocument,
  position: vscode.Position,
  result: vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined,
): void {
  const items = Array.isArray(result) ? result : (result?.items ?? []);
  const first = items[0];
  const current = client;
  if (!first || !current || typeof first.insertText !== 'string' || !first.command) {
    return;
  }
  const range = first.range ?? new vscode.Range(position, position);
  const item: WireItem = {
    insertText: first.insertText,
    range: current.code2ProtocolConverter.asRange(range),
    command: {
      title: first.command.title,
      command: first.command.command,
      arguments: first.command.arguments,
    },
  };
  const params = shownParams(item);
  if (!params || itemId(lastShown?.item) === itemId(item)) {
    return;
  }
  lastShown = { item, uri: document.uri.toString(), start: range.start };
  void current.sendNotification(DID_SHOW, params);
}

/** Run VS Code's `command` on the shown suggestion, then tell the server what it did. */
async function onShown(command: string, telemetry: 'partial' | 'dismiss'): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const shown = lastShown;
  await vscode.commands.executeCommand(command);
  const current = client;
  if (!editor || !shown || !current || editor.document.uri.toString() !== shown.uri) {
    return;
  }
  if (telemetry === 'dismiss') {
    const params = dismissParams(shown.item);
    if (params) {
      void current.sendNotification(DID_DISMISS, params);
    }
    return;
  }
  // VS Code's offsets count UTF-16 units, as acceptedLength does.
  const document = editor.document;
  const accepted = document.offsetAt(editor.selection.active) - document.offsetAt(shown.start);
  const params = partialParams(shown.item, accepted);
  if (params) {
    void current.sendNotification(DID_PARTIALLY_ACCEPT, params);
  }
}

function toClientState(state: State): ClientState {
  return state === State.Running ? 'running' : state === State.Starting ? 'starting' : 'stopped';
}

/** lspAssist/suggestionReady: ask VS Code to ask again if the notice is for what shows. */
function onSuggestionReady(current: LanguageClient, params: unknown): void {
  const editor = vscode.window.activeTextEditor;
  const selection = editor?.selection;
  const single = editor !== undefined && editor.selections.length === 1 && selection?.isEmpty;
  const uri = editor ? current.code2ProtocolConverter.asUri(editor.document.uri) : undefined;
  const view: EditorView = {
    uri,
    version: editor?.document.version ?? -1,
    cursor: single && selection ? { line: selection.active.line, character: selection.active.character } : undefined,
    focused: vscode.window.state.focused,
    inFlight: editor !== undefined && inFlight.has(editor.document.uri.toString()),
  };
  const reason = readyIgnored(params, view);
  output?.debug(`${READY_NOTIFICATION}: ${reason ?? 'asking again'}`);
  if (reason !== undefined || !editor) {
    return;
  }
  refreshMarks.mark(editor.document.uri.toString(), Date.now());
  void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
}

async function startClient(): Promise<void> {
  lastSent = serverSettings();
  const current = new LanguageClient('lspAssist', 'lsp-assist', serverOptions(), clientOptions());
  current.registerFeature(new SuggestionReadyFeature());
  client = current;
  clientListeners.set(
    current.onDidChangeState((event) => {
      status.setClientState(toClientState(event.newState));
      updateStatusItem();
      schedulePoll(0);
    }),
    current.onNotification(READY_NOTIFICATION, (params: unknown) => onSuggestionReady(current, params)),
  );
  status.setClientState('starting');
  updateStatusItem();
  try {
    await current.start();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    status.setClientState('stopped', `could not start the server (${message})`);
    updateStatusItem();
    void vscode.window.showErrorMessage(
      `lsp-assist: could not start the server (${message}). Check lspAssist.serverPath ` +
        `(after \`make\` in the repository: <repo>/.venv/bin/lsp-assist).`,
    );
  }
}

async function stopClient(): Promise<void> {
  const current = client;
  client = undefined;
  clearNextEdit();
  clientListeners.clear();
  stopPolling();
  status.setClientState('stopped');
  updateStatusItem();
  if (current) {
    try {
      await current.stop();
    } catch {
      // The server may already be gone.
    }
  }
}

function stopPolling(): void {
  if (pollTimer) {
    clearTimeout(pollTimer);
    pollTimer = undefined;
  }
}

/** Ask lspAssist.status after `delay` ms, and again every POLL_MS while it loads. */
function schedulePoll(delay: number): void {
  stopPolling();
  if (!status.needsPolling()) {
    return;
  }
  pollTimer = setTimeout(async () => {
    pollTimer = undefined;
    try {
      const was = status.state;
      status.applyStatus(await executeServerCommand('lspAssist.status', []));
      if (was !== 'ready' && status.state === 'ready') {
        cursorReported = undefined; // the model came: say where the cursor is
        cursorSeen = undefined;
        onCursorMoved(vscode.window.activeTextEditor);
      }
    } catch {
      // Not running (any more): the state listener says so.
    }
    updateStatusItem();
    schedulePoll(POLL_MS);
  }, delay);
}

function updateStatusItem(): void {
  if (!statusItem) {
    return;
  }
  const view = status.view();
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
  statusItem.backgroundColor =
    view.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
}

/** Send the changed settings to the running server (workspace/didChangeConfiguration). */
async function sendConfiguration(): Promise<void> {
  if (!client || !client.isRunning()) {
    return;
  }
  const current = serverSettings();
  const config = vscode.workspace.getConfiguration(SECTION);
  // A key the user removed goes back to the default declared in package.json.
  const changed = changedSettings(lastSent, current, (key) => config.inspect(key)?.defaultValue);
  lastSent = current;
  if (Object.keys(changed).length === 0) {
    return;
  }
  await client.sendNotification(DidChangeConfigurationNotification.type, { settings: changed });
  status.expectReload();
  schedulePoll(200);
}

async function executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
  if (!client || !client.isRunning()) {
    throw new Error('the lsp-assist server is not running');
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

async function showDocument(result: unknown): Promise<void> {
  const { text, language } = render(result);
  const doc = await vscode.workspace.openTextDocument({ content: text, language });
  await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

async function explainContext(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage('lsp-assist: open a file and place the cursor first.');
    return;
  }
  const position = editor.selection.active;
  try {
    // Positions are sent as LSP positions (line, UTF-16 character), like VS Code's.
    const result = await executeServerCommand('lspAssist.explainContext', [
      editor.document.uri.toString(),
      position.line,
      position.character,
    ]);
    await showDocument(result);
  } catch (err) {
    void vscode.window.showErrorMessage(`lsp-assist: explain context failed: ${String(err)}`);
  }
}

async function showStatus(): Promise<void> {
  try {
    const result = await executeServerCommand('lspAssist.status', []);
    status.applyStatus(result);
    updateStatusItem();
    await showDocument(result);
  } catch (err) {
    void vscode.window.showErrorMessage(`lsp-assist: status failed: ${String(err)}`);
  }
}

/** Run `lsp-assist doctor` and show its report. */
async function runDoctor(): Promise<void> {
  const { command, args } = launch();
  const doctor = doctorCommand(command, args);
  const report = await new Promise<string>((resolve) => {
    execFile(doctor.command, doctor.args, { timeout: 120_000 }, (err, stdout, stderr) => {
      const text = `$ ${doctor.command} ${doctor.args.join(' ')}\n\n${stdout}${stderr}`;
      resolve(err ? `${text}\n\n${err.message}` : text);
    });
  });
  const doc = await vscode.workspace.openTextDocument({ content: report, language: 'plaintext' });
  await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

function createNextEditDecorations(): NonNullable<typeof nextEditDecorations> {
  const removed = new vscode.ThemeColor('diffEditor.removedTextBackground');
  return {
    range: vscode.window.createTextEditorDecorationType({ backgroundColor: removed }),
    deletion: vscode.window.createTextEditorDecorationType({
      backgroundColor: removed,
      textDecoration: 'line-through',
      color: new vscode.ThemeColor('errorForeground'),
    }),
    text: vscode.window.createTextEditorDecorationType({
      after: { backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground') },
    }),
    hint: vscode.window.createTextEditorDecorationType({
      after: {
        color: new vscode.ThemeColor('editorCodeLens.foreground'),
        fontStyle: 'italic',
        margin: '0 0 0 2em',
      },
    }),
  };
}

/** The server proposes next edits, and the user has not turned them off. */
function nextEditsOn(current: LanguageClient): boolean {
  return (
    vscode.workspace.getConfiguration(SECTION).get<boolean>('nextEdit.enabled', true) !== false &&
    current.isRunning() &&
    nextEditOffered(current.initializeResult?.capabilities)
  );
}

function servedDocument(document: vscode.TextDocument): boolean {
  return (
    (document.uri.scheme === 'file' || document.uri.scheme === 'untitled') &&
    LANGUAGES.includes(document.languageId)
  );
}

/** Remove the shown next edit and cancel the request on its way. */
function clearNextEdit(): void {
  if (nextEditTimer) {
    clearTimeout(nextEditTimer);
    nextEditTimer = undefined;
  }
  nextEditRequest?.cancel();
  nextEditRequest = undefined;
  const shown = shownNextEdit;
  shownNextEdit = undefined;
  if (shown) {
    for (const type of Object.values(nextEditDecorations ?? {})) {
      shown.editor.setDecorations(type, []);
    }
    void vscode.commands.executeCommand('setContext', NEXT_EDIT_VISIBLE, false);
  }
}

function scheduleNextEdit(): void {
  if (nextEditTimer) {
    clearTimeout(nextEditTimer);
  }
  nextEditTimer = setTimeout(() => {
    nextEditTimer = undefined;
    void requestNextEdit();
  }, NEXT_EDIT_DEBOUNCE_MS);
}

/** Ask for the next edits at the active editor's cursor and show the first of its document. */
async function requestNextEdit(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const current = client;
  clearNextEdit();
  if (!editor || !current || !nextEditsOn(current) || !servedDocument(editor.document)) {
    return;
  }
  const document = editor.document;
  const version = document.version;
  const uri = current.code2ProtocolConverter.asUri(document.uri);
  const cursor = editor.selection.active;
  const params = nextEditParams(uri, version, { line: cursor.line, character: cursor.character });
  const source = new vscode.CancellationTokenSource();
  nextEditRequest = source;
  let answer: unknown;
  let cancelled = false;
  try {
    answer = await current.sendRequest<unknown>(NEXT_EDIT_METHOD, params, source.token);
  } catch (err) {
    if (!source.token.isCancellationRequested) {
      output?.debug(`${NEXT_EDIT_METHOD}: ${String(err)}`);
    }
    return;
  } finally {
    cancelled = source.token.isCancellationRequested;
    if (nextEditRequest === source) {
      nextEditRequest = undefined;
    }
    source.dispose();
  }
  if (cancelled || client !== current || vscode.window.activeTextEditor !== editor || document.version !== version) {
    return;
  }
  const edit = chooseNextEdit(answer, uri, version);
  if (edit) {
    showNextEdit(editor, edit, current);
  }
}

function showNextEdit(editor: vscode.TextEditor, edit: NextEdit, current: LanguageClient): void {
  const types = nextEditDecorations;
  if (!types) {
    return;
  }
  const document = editor.document;
  const view = nextEditView(edit);
  const range = document.validateRange(current.protocol2CodeConverter.asRange(view.range));
  const lineEnd = document.lineAt(range.start.line).range.end;
  editor.setDecorations(types.range, view.deletion || range.isEmpty ? [] : [range]);
  editor.setDecorations(types.deletion, view.deletion ? [range] : []);
  editor.setDecorations(
    types.text,
    view.after === undefined
      ? []
      : [{ range: new vscode.Range(range.end, range.end), renderOptions: { after: { contentText: view.after } } }],
  );
  editor.setDecorations(types.hint, [
    { range: new vscode.Range(lineEnd, lineEnd), renderOptions: { after: { contentText: view.hint } } },
  ]);
  shownNextEdit = { edit, editor, version: document.version };
  void vscode.commands.executeCommand('setContext', NEXT_EDIT_VISIBLE, true);
  void current.sendNotification(DID_SHOW_NEXT_EDIT, { item: edit });
}

/** Tab while a next edit shows: move the cursor to it; there already, apply it. */
async function nextEditJumpOrApply(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const shown = shownNextEdit;
  const current = client;
  if (
    !editor ||
    !shown ||
    !current ||
    shown.editor.document !== editor.document ||
    editor.document.version !== shown.version
  ) {
    // The key is bound while the context key says one shows; otherwise it is Tab.
    clearNextEdit();
    await vscode.commands.executeCommand('tab');
    return;
  }
  const range = editor.document.validateRange(current.protocol2CodeConverter.asRange(shown.edit.range));
  const cursor = editor.selection.active;
  // The range as the editor holds it: where a jump puts the cursor.
  const target = current.code2ProtocolConverter.asRange(range);
  if (nextEditAction({ line: cursor.line, character: cursor.character }, { range: target }) === 'jump') {
    editor.selection = new vscode.Selection(range.start, range.start);
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    return;
  }
  const edit = shown.edit;
  clearNextEdit();
  const applied = await editor.edit((builder) => builder.replace(range, edit.text));
  if (!applied) {
    return;
  }
  editor.selection = new vscode.Selection(range.start, range.start);
  // Ask for the next edit once the server has handled the accept: with the model source
  // the next answer is then the rest of the same rewrite, not a new one.
  clearTimeout(nextEditTimer);
  nextEditTimer = undefined;
  if (edit.command?.command) {
    try {
      const answer = await executeServerCommand(edit.command.command, edit.command.arguments ?? []);
      output?.debug(`${edit.command.command}: ${JSON.stringify(answer)}`);
    } catch (err) {
      output?.warn(`${edit.command.command} failed: ${String(err)}`);
    }
  }
  if (vscode.window.activeTextEditor === editor) {
    scheduleNextEdit();
  }
}

function placeOf(editor: vscode.TextEditor): CursorPlace {
  const active = editor.selection.active;
  return {
    uri: editor.document.uri.toString(),
    version: editor.document.version,
    line: active.line,
    character: active.character,
  };
}

/**
 * The cursor moved, or another editor came to the front: once it rests `reportCursorMs`
 * at a new place reached without an edit, tell the server, which evaluates the prompt
 * there so the first suggestion where the user types needs no cold prompt.
 */
function onCursorMoved(editor: vscode.TextEditor | undefined): void {
  if (!editor || !LANGUAGES.includes(editor.document.languageId)) {
    return;
  }
  const place = placeOf(editor);
  const action = cursorMoved(cursorSeen, cursorReported, place, editor.selection.isEmpty);
  cursorSeen = place;
  if (action === 'none') {
    return;
  }
  clearTimeout(cursorTimer);
  cursorTimer = undefined;
  const rest = vscode.workspace.getConfiguration(SECTION).get<number>('reportCursorMs', 300);
  if (action === 'cancel' || !(rest > 0)) {
    return;
  }
  cursorTimer = setTimeout(() => {
    cursorTimer = undefined;
    const current = client;
    const now = vscode.window.activeTextEditor;
    if (!current || !now || status.state !== 'ready') {
      return;
    }
    if (JSON.stringify(placeOf(now)) !== JSON.stringify(place)) {
      return; // moved or edited since: a newer event decides
    }
    cursorReported = place;
    void current.sendNotification(DID_MOVE_CURSOR, {
      textDocument: { uri: place.uri, version: place.version },
      position: { line: place.line, character: place.character },
    });
  }, rest);
}

function onDocumentChanged(event: vscode.TextDocumentChangeEvent): void {
  if (event.contentChanges.length === 0) {
    return;
  }
  if (shownNextEdit?.editor.document === event.document) {
    clearNextEdit();
  }
  if (vscode.window.activeTextEditor?.document === event.document && client && nextEditsOn(client)) {
    scheduleNextEdit();
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('lsp-assist', { log: true });
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = 'lspAssist.showStatus';
  statusItem.show();
  context.subscriptions.push(output, statusItem, { dispose: () => clientListeners.clear() });
  context.subscriptions.push({ dispose: stopPolling });
  nextEditDecorations = createNextEditDecorations();
  context.subscriptions.push({ dispose: clearNextEdit }, ...Object.values(nextEditDecorations));

  context.subscriptions.push(
    vscode.commands.registerCommand('lspAssist.showExplainContext', explainContext),
    vscode.commands.registerCommand('lspAssist.showStatus', showStatus),
    vscode.commands.registerCommand('lspAssist.runDoctor', runDoctor),
    vscode.commands.registerCommand('lspAssist.acceptNextWord', () =>
      onShown('editor.action.inlineSuggest.acceptNextWord', 'partial'),
    ),
    vscode.commands.registerCommand('lspAssist.dismissSuggestion', () =>
      onShown('editor.action.inlineSuggest.hide', 'dismiss'),
    ),
    vscode.commands.registerCommand('lspAssist.nextEdit', requestNextEdit),
    vscode.commands.registerCommand('lspAssist.nextEditJumpOrApply', nextEditJumpOrApply),
    vscode.commands.registerCommand('lspAssist.nextEditDismiss', clearNextEdit),
    vscode.workspace.onDidChangeTextDocument(onDocumentChanged),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      clearNextEdit();
      onCursorMoved(editor);
    }),
    vscode.window.onDidChangeTextEditorSelection((event) => onCursorMoved(event.textEditor)),
    vscode.commands.registerCommand('lspAssist.restartServer', async () => {
      await stopClient();
      await startClient();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      if (event.affectsConfiguration(`${SECTION}.nextEdit.enabled`)) {
        clearNextEdit();
      }
      if (LAUNCH_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        await stopClient();
        await startClient();
        return;
      }
      await sendConfiguration();
    }),
  );

  await startClient();
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
