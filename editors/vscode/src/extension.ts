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

import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';

const SECTION = 'lspAssist';

/** Settings that go to the server, as its flat camelCase keys. */
const SERVER_KEYS = [
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
const LAUNCH_KEYS = ['serverPath', 'serverArgs'] as const;

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

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel | undefined;
let statusItem: vscode.StatusBarItem | undefined;
let lastSent: Record<string, unknown> = {};

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

function serverOptions(): ServerOptions {
  const config = vscode.workspace.getConfiguration(SECTION);
  const command = config.get<string>('serverPath') || 'lsp-assist';
  const args = config.get<string[]>('serverArgs') ?? ['serve'];
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
      // The server also answers textDocument/completion with one item labelled
      // "lsp-assist" for editors without inline completion. VS Code shows the same
      // suggestion as ghost text, so the item is hidden unless asked for.
      provideCompletionItem: (document, position, context, token, next) => {
        if (!vscode.workspace.getConfiguration(SECTION).get<boolean>('completionItems')) {
          return [];
        }
        return next(document, position, context, token);
      },
    },
  };
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  lastSent = serverSettings();
  client = new LanguageClient('lspAssist', 'lsp-assist', serverOptions(), clientOptions());
  context.subscriptions.push(
    client.onDidChangeState((event) => updateStatusItem(event.newState)),
  );
  updateStatusItem(State.Starting);
  try {
    await client.start();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    void vscode.window.showErrorMessage(
      `lsp-assist: could not start the server (${message}). Check lspAssist.serverPath.`,
    );
  }
}

async function stopClient(): Promise<void> {
  const current = client;
  client = undefined;
  if (current) {
    try {
      await current.stop();
    } catch {
      // The server may already be gone.
    }
  }
}

function updateStatusItem(state: State): void {
  if (!statusItem) {
    return;
  }
  const label = state === State.Running ? 'ready' : state === State.Starting ? 'starting' : 'stopped';
  statusItem.text = state === State.Running ? '$(sparkle) lsp-assist' : `$(circle-slash) lsp-assist`;
  statusItem.tooltip = `lsp-assist: ${label} (click for status)`;
}

/** Send the changed settings to the running server (workspace/didChangeConfiguration). */
async function sendConfiguration(): Promise<void> {
  if (!client || !client.isRunning()) {
    return;
  }
  const current = serverSettings();
  const config = vscode.workspace.getConfiguration(SECTION);
  const changed: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(current)) {
    if (JSON.stringify(lastSent[key]) !== JSON.stringify(value)) {
      changed[key] = value;
    }
  }
  // A key the user removed goes back to the default declared in package.json.
  for (const key of Object.keys(lastSent)) {
    if (!(key in current)) {
      const info = config.inspect(key);
      if (info && info.defaultValue !== undefined) {
        changed[key] = info.defaultValue;
      }
    }
  }
  lastSent = current;
  if (Object.keys(changed).length === 0) {
    return;
  }
  await client.sendNotification(DidChangeConfigurationNotification.type, { settings: changed });
}

async function executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
  if (!client || !client.isRunning()) {
    throw new Error('the lsp-assist server is not running');
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

function render(result: unknown): { text: string; language: string } {
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
    await showDocument(result);
  } catch (err) {
    void vscode.window.showErrorMessage(`lsp-assist: status failed: ${String(err)}`);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('lsp-assist', { log: true });
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = 'lspAssist.showStatus';
  statusItem.show();
  context.subscriptions.push(output, statusItem);

  context.subscriptions.push(
    vscode.commands.registerCommand('lspAssist.showExplainContext', explainContext),
    vscode.commands.registerCommand('lspAssist.showStatus', showStatus),
    vscode.commands.registerCommand('lspAssist.restartServer', async () => {
      await stopClient();
      await startClient(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      if (LAUNCH_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        await stopClient();
        await startClient(context);
        return;
      }
      await sendConfiguration();
    }),
  );

  await startClient(context);
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
