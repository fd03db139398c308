// The extension's logic that needs no VS Code: what the status bar says, which settings
// to send, how to render a command's result, the doctor command line, the per-client
// listeners a restart must dispose, when a lspAssist/suggestionReady notice asks
// again (early answers), and which next edit shows and what its key does. extension.ts
// wires it to the VS Code API; the unit tests (test/unit/*.test.mjs, node's test
// runner) import the compiled out/logic.js.

/** Settings that go to the server, as its flat camelCase keys. */
export const SERVER_KEYS = [
  'modelPath',
  'draftModelPath',
  'contextBudget',
  'draft',
  'debounceMs',
  'maxTokens',
  'backend',
  'remoteUrl',
] as const;

/** Settings read by this extension only; changing one restarts the server. */
export const LAUNCH_KEYS = ['serverPath', 'serverArgs'] as const;

export const LANGUAGES = [
  'python',
  'javascript',
  'javascriptreact',
  'typescript',
  'typescriptreact',
  'go',
  'rust',
  'java',
  'c',
  'cpp',
];

export interface Disposable {
  dispose(): unknown;
}

/** Holds the disposables of one thing (a client); setting new ones disposes the old. */
export class DisposableSlot {
  private items: Disposable[] = [];

  set(...items: Disposable[]): void {
    this.clear();
    this.items = items;
  }

  clear(): void {
    const items = this.items;
    this.items = [];
    for (const item of items) {
      try {
        item.dispose();
      } catch {
        // A client that is gone may throw on dispose; nothing is left to free.
      }
    }
  }

  get size(): number {
    return this.items.length;
  }
}

/** The client's connection state, as vscode-languageclient's State enum names it. */
export type ClientState = 'stopped' | 'starting' | 'running';

/** What the status bar shows. */
export type AssistState = 'stopped' | 'starting' | 'loading' | 'ready' | 'thinking' | 'error';

/** The parts of the server's lspAssist.status answer the status bar reads. */
export interface ServerStatus {
  initialized?: boolean;
  ready?: boolean;
  model?: { loaded?: boolean; error?: string | null; path?: string | null };
}

export interface StatusView {
  state: AssistState;
  text: string;
  tooltip: string;
}

/**
 * The status bar's state: the client's connection, the server's lspAssist.status (model
 * loading, ready, failed), requests in flight and the last latency.
 */
export class StatusModel {
  private client: ClientState = 'stopped';
  private server: 'unknown' | 'loading' | 'ready' | 'error' = 'unknown';
  private message: string | undefined;
  private modelPath: string | undefined;
  private inFlight = 0;
  private requestError: string | undefined;
  latencyMs: number | undefined;

  setClientState(state: ClientState, failure?: string): void {
    this.client = state;
    if (state !== 'running') {
      this.server = failure ? 'error' : 'unknown';
      this.message = failure;
      this.inFlight = 0;
    }
  }

  /** Read an lspAssist.status result. */
  applyStatus(result: unknown): void {
    if (!result || typeof result !== 'object') {
      return;
    }
    const status = result as ServerStatus;
    const model = status.model ?? {};
    this.modelPath = model.path ?? undefined;
    if (model.error) {
      this.server = 'error';
      this.message = String(model.error);
    } else if (status.ready === true || (status.ready === undefined && status.initialized === true)) {
      this.server = 'ready';
      this.message = undefined;
    } else {
      this.server = 'loading';
      this.message = undefined;
    }
  }

  /** The server may have changed its model: ask again until it says ready. */
  expectReload(): void {
    if (this.server === 'ready') {
      this.server = 'unknown';
    }
  }

  requestStarted(): void {
    this.inFlight += 1;
  }

  /** A request ended after `ms`; `error` when it failed (not when it was cancelled). */
  requestFinished(ms: number, error?: string): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (error) {
      this.requestError = error;
    } else {
      this.requestError = undefined;
      this.latencyMs = ms;
    }
  }

  /** Poll lspAssist.status while the server runs and has not said ready or failed. */
  needsPolling(): boolean {
    return this.client === 'running' && (this.server === 'unknown' || this.server === 'loading');
  }

  get state(): AssistState {
    if (this.client === 'stopped') {
      return this.server === 'error' ? 'error' : 'stopped';
    }
    if (this.client === 'starting') {
      return 'starting';
    }
    if (this.server === 'error' || this.requestError) {
      return 'error';
    }
    if (this.server !== 'ready') {
      return 'loading';
    }
    return this.inFlight > 0 ? 'thinking' : 'ready';
  }

  view(): StatusView {
    const state = this.state;
    const latency = this.latencyMs !== undefined ? ` ${Math.round(this.latencyMs)} ms` : '';
    const model = this.modelPath ? ` (${this.modelPath})` : '';
    switch (state) {
      case 'stopped':
        return { state, text: '$(circle-slash) lsp-assist', tooltip: 'lsp-assist: stopped' };
      case 'starting':
        return { state, text: '$(loading~spin) lsp-assist', tooltip: 'lsp-assist: starting the server' };
      case 'loading':
        return {
          state,
          text: '$(loading~spin) lsp-assist: loading',
          tooltip: `lsp-assist: loading the model${model}`,
        };
      case 'thinking':
        return { state, text: '$(sync~spin) lsp-assist', tooltip: 'lsp-assist: asking the model' };
      case 'error':
        return {
          state,
          text: '$(error) lsp-assist: error',
          tooltip: `lsp-assist: ${this.message ?? this.requestError ?? 'error'} (click for status)`,
        };
      default:
        return {
          state,
          text: `$(sparkle) lsp-assist${latency}`,
          tooltip: `lsp-assist: ready${model}${latency ? `; last suggestion in${latency}` : ''} (click for status)`,
        };
    }
  }
}

/**
 * The keys to send in workspace/didChangeConfiguration: those whose value changed, and
 * those the user removed (with `defaultOf(key)`, the default package.json declares).
 */
export function changedSettings(
  lastSent: Record<string, unknown>,
  current: Record<string, unknown>,
  defaultOf: (key: string) => unknown,
): Record<string, unknown> {
  const changed: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(current)) {
    if (JSON.stringify(lastSent[key]) !== JSON.stringify(value)) {
      changed[key] = value;
    }
  }
  for (const key of Object.keys(lastSent)) {
    if (!(key in current)) {
      const fallback = defaultOf(key);
      if (fallback !== undefined) {
        changed[key] = fallback;
      }
    }
  }
  return changed;
}

/** A command's result as a document: its Markdown/text field, else JSON. */
export function render(result: unknown): { text: string; language: string } {
  if (typeof result === 'string') {
    return { text: result, language: 'markdown' };
  }
  if (result && typeof result === 'object') {
    const record = result as Record<string, unknown>;
    for (const key of ['markdown', 'text', 'prompt']) {
      if (typeof record[key] === 'string') {
        const rest = { ...record };
        delete rest[key];
        const tail = Object.keys(rest).length
          ? '\n\n```json\n' + JSON.stringify(rest, null, 2) + '\n```\n'
          : '';
        return { text: String(record[key]) + tail, language: 'markdown' };
      }
    }
  }
  return { text: JSON.stringify(result, null, 2), language: 'json' };
}

/** `lsp-assist doctor` for the configured server: its arguments up to `serve`, then doctor. */
export function doctorCommand(serverPath: string, serverArgs: string[]): { command: string; args: string[] } {
  const serve = serverArgs.indexOf('serve');
  const head = serve >= 0 ? serverArgs.slice(0, serve) : [];
  return { command: serverPath || 'lsp-assist', args: [...head, 'doctor'] };
}

// Early answers ----------------------------------------------------------------------
//
// The server may answer an inline request with the start of a suggestion and write the
// rest into its cache; a client that sets capabilities.experimental
// .lspAssistSuggestionReady is sent lspAssist/suggestionReady when the whole of it is
// ready. The extension then asks VS Code to ask again (editor.action.inlineSuggest
// .trigger), and sends that request as Automatic: the server's cache answers those,
// while an explicit (Invoked) request is for alternatives and goes to the model.

export const READY_NOTIFICATION = 'lspAssist/suggestionReady';
export const READY_CAPABILITY = 'lspAssistSuggestionReady';

/** Put the opt-in into client capabilities (a StaticFeature's fillClientCapabilities). */
export function addReadyCapability(capabilities: { experimental?: unknown }): void {
  const current = capabilities.experimental;
  const experimental: Record<string, unknown> =
    current && typeof current === 'object' && !Array.isArray(current)
      ? (current as Record<string, unknown>)
      : {};
  experimental[READY_CAPABILITY] = true;
  capabilities.experimental = experimental;
}

export interface LspPosition {
  line: number;
  character: number;
}

/** What the notice is compared with: the active editor, when the notice arrives. */
export interface EditorView {
  /** The active editor's document, as the client sends its URI; undefined: none. */
  uri: string | undefined;
  version: number;
  /** The cursor; undefined when there is a selection or several cursors. */
  cursor: LspPosition | undefined;
  focused: boolean;
  /** An inline completion request for this document is out. */
  inFlight: boolean;
}

function isPosition(value: unknown): value is LspPosition {
  const p = value as LspPosition | undefined;
  return !!p && Number.isInteger(p.line) && Number.isInteger(p.character);
}

/**
 * Why a lspAssist/suggestionReady notice is not acted on, or undefined: ask again.
 * The suggestion's start is taken to show when the cursor is where it was asked for or
 * after it (typed into it): VS Code cancels an inline request the user moved away from,
 * and the server stops writing a suggestion when a request misses its cache.
 */
export function readyIgnored(notice: unknown, view: EditorView): string | undefined {
  const params = notice as { textDocument?: { uri?: unknown; version?: unknown }; position?: unknown };
  if (!params || typeof params !== 'object' || typeof params.textDocument?.uri !== 'string' || !isPosition(params.position)) {
    return 'malformed';
  }
  if (view.uri === undefined) {
    return 'no active editor';
  }
  if (view.uri !== params.textDocument.uri) {
    return 'not the current document';
  }
  const version = params.textDocument.version;
  if (typeof version === 'number' && version > view.version) {
    return 'a newer document than the editor has';
  }
  if (!view.focused) {
    return 'the window is not focused';
  }
  if (view.cursor === undefined) {
    return 'a selection';
  }
  if (view.inFlight) {
    return 'a request is in flight';
  }
  const at = params.position;
  const cursor = view.cursor;
  if (cursor.line < at.line || (cursor.line === at.line && cursor.character < at.character)) {
    return 'another place';
  }
  return undefined;
}

/** Inline completion requests out, per document URI. */
export class InFlight {
  private counts = new Map<string, number>();

  start(uri: string): void {
    this.counts.set(uri, (this.counts.get(uri) ?? 0) + 1);
  }

  end(uri: string): void {
    const left = (this.counts.get(uri) ?? 1) - 1;
    if (left > 0) {
      this.counts.set(uri, left);
    } else {
      this.counts.delete(uri);
    }
  }

  has(uri: string): boolean {
    return this.counts.has(uri);
  }
}

/**
 * One mark per document: the next inline request there, within `ttlMs`, was caused by a
 * notice and goes as Automatic. A mark is taken once.
 */
export class RefreshMarks {
  private marks = new Map<string, number>();

  constructor(private readonly ttlMs = 2000) {}

  mark(uri: string, now: number): void {
    this.marks.set(uri, now);
  }

  take(uri: string, now: number): boolean {
    const at = this.marks.get(uri);
    this.marks.delete(uri);
    return at !== undefined && now - at <= this.ttlMs;
  }
}

// Telemetry per shown suggestion, as copilot-language-server's clients send it:
// textDocument/didShowCompletion {item}, textDocument/didPartiallyAcceptCompletion
// {item, acceptedLength} (UTF-16 units from the start of the item's text to the end of
// what was accepted: a JS string's length), and lsp-assist's own
// lspAssist/didDismissCompletion {item: {command}}. The server reads the item's id,
// its command's first argument.

export const DID_SHOW = 'textDocument/didShowCompletion';
export const DID_PARTIALLY_ACCEPT = 'textDocument/didPartiallyAcceptCompletion';
export const DID_DISMISS = 'lspAssist/didDismissCompletion';
/** Where the cursor rests: the server evaluates the prompt there before the user types. */
export const DID_MOVE_CURSOR = 'lspAssist/didMoveCursor';

/** An inline completion item as the server sent it (what the notifications carry back). */
export interface WireItem {
  insertText: string;
  range?: unknown;
  command?: { title?: string; command: string; arguments?: unknown[] };
}

/** The item's id (its command's first argument), or undefined. */
export function itemId(item: WireItem | undefined): string | undefined {
  const first = item?.command?.arguments?.[0];
  return typeof first === 'string' && first !== '' ? first : undefined;
}

/** didShowCompletion's params, or undefined for an item without an id. */
export function shownParams(item: WireItem | undefined): { item: WireItem } | undefined {
  return item && itemId(item) ? { item } : undefined;
}

/** didPartiallyAcceptCompletion's params when `acceptedLength` UTF-16 units of the item's
 * text are in and some are left (all of it is the item's command), else undefined. */
export function partialParams(
  item: WireItem | undefined,
  acceptedLength: number,
): { item: WireItem; acceptedLength: number } | undefined {
  if (!item || !itemId(item) || !Number.isInteger(acceptedLength)) {
    return undefined;
  }
  if (acceptedLength <= 0 || acceptedLength >= item.insertText.length) {
    return undefined;
  }
  return { item, acceptedLength };
}

/** lspAssist/didDismissCompletion's params (copilot.el's shape: the command alone). */
export function dismissParams(item: WireItem | undefined): { item: { command: unknown } } | undefined {
  return item && itemId(item) ? { item: { command: item.command } } : undefined;
}

// Next edits (issue 22): the server answers textDocument/copilotInlineEdit, GitHub
// Copilot's method, with edits anywhere in the file (a rename's remaining references, a
// removed parameter's arguments). The extension shows the first edit of the document at
// its version, jumps to it on the key and applies it on the key again, then runs the
// edit's command (github.copilot.didAcceptNextEditSuggestionItem) so the server counts it.

export const NEXT_EDIT_METHOD = 'textDocument/copilotInlineEdit';
export const DID_SHOW_NEXT_EDIT = 'textDocument/didShowInlineEdit';
export const NEXT_EDIT_ACCEPT = 'github.copilot.didAcceptNextEditSuggestionItem';

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

/** One edit of the server's answer `{edits: [...]}`. */
export interface NextEdit {
  text: string;
  textDocument: { uri: string; version: number };
  range: LspRange;
  command?: { title?: string; command: string; arguments?: unknown[] };
}

/** copilotInlineEdit's params: the document at the version the editor holds, the cursor. */
export function nextEditParams(
  uri: string,
  version: number,
  position: LspPosition,
): { textDocument: { uri: string; version: number }; position: LspPosition } {
  return { textDocument: { uri, version }, position };
}

/** Whether the server proposes next edits: it lists the accept command unless `nextEdit` is off. */
export function nextEditOffered(capabilities: unknown): boolean {
  const commands = (capabilities as { executeCommandProvider?: { commands?: unknown } } | undefined)
    ?.executeCommandProvider?.commands;
  return Array.isArray(commands) && commands.includes(NEXT_EDIT_ACCEPT);
}

function isRange(value: unknown): value is LspRange {
  const r = value as LspRange | undefined;
  return !!r && isPosition(r.start) && isPosition(r.end);
}

/** The edit to show: the first of the answer for `uri` at `version`; none when stale. */
export function chooseNextEdit(answer: unknown, uri: string, version: number): NextEdit | undefined {
  const edits = (answer as { edits?: unknown } | null | undefined)?.edits;
  if (!Array.isArray(edits)) {
    return undefined;
  }
  return edits.find(
    (edit): edit is NextEdit =>
      !!edit &&
      typeof edit.text === 'string' &&
      isRange(edit.range) &&
      edit.textDocument?.uri === uri &&
      edit.textDocument?.version === version,
  );
}

/** The key: jump to the edit's start unless the cursor is there already, then apply. */
export function nextEditAction(cursor: LspPosition, edit: { range: LspRange }): 'jump' | 'apply' {
  const start = edit.range.start;
  return cursor.line === start.line && cursor.character === start.character ? 'apply' : 'jump';
}

/** What the decorations show: the range (struck through for a deletion), the new text's
 * first line after it (` …` when more lines follow), and the hint on the start line. */
export interface NextEditView {
  range: LspRange;
  deletion: boolean;
  after: string | undefined;
  hint: string;
}

export function nextEditView(edit: NextEdit, key = 'Tab'): NextEditView {
  const deletion = edit.text === '';
  const [first, ...rest] = edit.text.split(/\r?\n/);
  return {
    range: edit.range,
    deletion,
    after: deletion ? undefined : first + (rest.length ? ' …' : ''),
    hint: deletion ? `next edit: delete (${key})` : `next edit (${key})`,
  };
}

/** Offset in `text` of an LSP position (UTF-16 units, as JavaScript strings count). */
export function offsetAt(text: string, position: LspPosition): number {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    const newline = text.indexOf('\n', offset);
    if (newline < 0) {
      return text.length;
    }
    offset = newline + 1;
  }
  const end = text.indexOf('\n', offset);
  const lineEnd = end < 0 ? text.length : end;
  return Math.min(offset + position.character, lineEnd);
}

/** `text` with the edit applied (what the editor's edit does to the document). */
export function applyNextEdit(text: string, edit: { range: LspRange; text: string }): string {
  const start = offsetAt(text, edit.range.start);
  const end = Math.max(start, offsetAt(text, edit.range.end));
  return text.slice(0, start) + edit.text + text.slice(end);
}

/** Where the cursor rests in a document at a version (lspAssist/didMoveCursor). */
export interface CursorPlace {
  uri: string;
  version: number;
  line: number;
  character: number;
}

/**
 * What to do when the selection moved: `report` after the rest, or `cancel` a pending
 * report. An edit (the document's version moved since the last selection seen) cancels:
 * the request at the new place says it. A place already reported, or a selection that is
 * not a cursor, is `none`.
 */
export function cursorMoved(
  seen: CursorPlace | undefined,
  reported: CursorPlace | undefined,
  place: CursorPlace,
  empty: boolean,
): 'report' | 'cancel' | 'none' {
  if (seen && seen.uri === place.uri && seen.version !== place.version) {
    return 'cancel';
  }
  if (!empty) {
    return 'none';
  }
  const same =
    reported !== undefined &&
    reported.uri === place.uri &&
    reported.version === place.version &&
    reported.line === place.line &&
    reported.character === place.character;
  return same ? 'none' : 'report';
}
