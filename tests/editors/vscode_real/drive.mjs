// Drives real VS Code (code-server's workbench) in headless Chromium for
// tests/editors/test_vscode_real.py: one JSON request a line on stdin, one JSON answer a
// line on stdout ({"ok": true, "value": ...} or {"ok": false, "error": "..."}).
//
//   node drive.mjs --modules <install>/node_modules --chromium /usr/bin/chromium
//
// The requests are user actions (keys, typing, the command palette, quick open) and
// readings of what the workbench shows (ghost text, the status bar, the editor's lines
// and cursor, the extension's decorations); the test polls them and decides what they
// must be. playwright-core comes from the
// install folder (.ci/code_server.sh), not from a node_modules beside this file.
import { createRequire } from 'node:module';
import * as readline from 'node:readline';

const argv = process.argv.slice(2);
function arg(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
}
const require = createRequire(`${arg('modules')}/`);
const { chromium } = require('playwright-core');

let browser;
let page;
const consoleErrors = [];

/** The lsp-assist status bar item (its id is the extension's). */
const STATUS_ITEM = '[id="lsp-assist.lsp-assist"]';

async function statusItem() {
  return page.evaluate((selector) => {
    const el = document.querySelector(selector);
    return el ? { text: el.textContent.trim(), label: el.getAttribute('aria-label') ?? '' } : null;
  }, STATUS_ITEM);
}

/** Lines of the active editor on screen, top to bottom (each with its top in px). */
function visibleLines() {
  const editor = document.querySelector('.editor-group-container.active .monaco-editor');
  if (!editor) {
    return [];
  }
  return [...editor.querySelectorAll('.view-lines .view-line')]
    .map((el) => ({ top: parseFloat(el.style.top), text: el.textContent.replace(/\u00a0/g, ' ') }))
    .sort((a, b) => a.top - b.top)
    .map((line) => line.text);
}

/** Ghost text in the active editor: the part on the cursor's line, the lines below it. */
function ghostText() {
  const editor = document.querySelector('.editor-group-container.active .monaco-editor');
  if (!editor) {
    return { inline: '', below: [] };
  }
  const inline = [...editor.querySelectorAll('.view-lines [class*="ghost-text-decoration"]')]
    .map((el) => el.textContent.replace(/\u00a0/g, ' '))
    .join('');
  const below = [...editor.querySelectorAll('.ghost-text .view-line')].map((el) =>
    el.textContent.replace(/\u00a0/g, ' '),
  );
  return { inline, below };
}

/**
 * The decorations the extension drew in the active editor (TextEditorDecorationType):
 * `after` texts (CSS content of the decorated span's ::after) with the line they are on,
 * background ranges (view-overlays, as 0-based columns) and inline styles (a struck-through
 * range's text).
 */
function extensionDecorations() {
  const editor = document.querySelector('.editor-group-container.active .monaco-editor');
  if (!editor) {
    return { after: [], ranges: [], inline: [] };
  }
  const { lines, charWidth, text } = editorGeometry(editor);
  const ours = '[class*="TextEditorDecorationType"]';
  const after = [];
  const inline = [];
  for (const el of editor.querySelectorAll(`.view-lines span${ours}`)) {
    const line = text(el.closest('.view-line'));
    const content = getComputedStyle(el, '::after').content;
    if (content && content !== 'none' && content !== 'normal') {
      after.push({ text: JSON.parse(content), line, column: line === null ? null : lineColumn(el) });
    } else if (el.textContent) {
      const style = getComputedStyle(el);
      inline.push({ text: el.textContent.replace(/\u00a0/g, " "), line, textDecoration: style.textDecorationLine });
    }
  }
  const ranges = [];
  for (const el of editor.querySelectorAll(`.view-overlays ${ours}.cdr`)) {
    const top = Math.round(parseFloat(el.parentElement.style.top));
    const left = parseFloat(el.style.left);
    const width = parseFloat(el.style.width);
    ranges.push({
      line: text(lines.get(top)),
      start: Math.round(left / charWidth),
      end: Math.round((left + width) / charWidth),
    });
  }
  return { after, ranges, inline };

  /** The active editor's lines on screen by their top (px), and its character width. */
  function editorGeometry(editor) {
    const lines = new Map();
    for (const el of editor.querySelectorAll('.view-lines .view-line')) {
      lines.set(Math.round(parseFloat(el.style.top)), el);
    }
    // A monospace font: the width of a line's text over its length.
    let charWidth = 0;
    for (const el of lines.values()) {
      const span = el.firstElementChild;
      const text = el.textContent;
      if (span && text.length > 8) {
        charWidth = span.getBoundingClientRect().width / span.textContent.length;
        break;
      }
    }
    const text = (el) => (el ? el.textContent.replace(/\u00a0/g, ' ') : null);
    return { lines, charWidth, text };
  }

  // The column (0-based) where `el` starts on its line: the text of the spans before it.
  function lineColumn(el) {
    let column = 0;
    for (const span of el.closest('.view-line').querySelectorAll('span > span')) {
      if (span === el) {
        return column;
      }
      column += span.textContent.length;
    }
    return null;
  }
}

const READERS = { visibleLines, ghostText, extensionDecorations };

/** The status bar's cursor position, "Ln 17, Col 4" -> {line: 17, column: 4} (1-based). */
async function cursor() {
  const text = await page.evaluate(
    () => document.querySelector('[id="status.editor.selection"]')?.textContent ?? '',
  );
  const m = /Ln (\d+), Col (\d+)/.exec(text);
  return m ? { line: Number(m[1]), column: Number(m[2]) } : null;
}

async function quickInput(prefix, text, wantRow) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await page.keyboard.press(prefix);
  await input.waitFor({ state: 'visible', timeout: 30_000 });
  await page.keyboard.type(text, { delay: 20 });
  // Wait for the row before Enter: Enter on an old list picks its first entry.
  await page
    .locator('.quick-input-widget .monaco-list-row', { hasText: wantRow })
    .first()
    .waitFor({ state: 'visible', timeout: 30_000 });
  await page.keyboard.press('Enter');
  await input.waitFor({ state: 'hidden', timeout: 30_000 });
}

const OPS = {
  async launch({ url, timeoutMs = 120_000, width = 1400, height = 900 }) {
    browser = await chromium.launch({
      executablePath: arg('chromium', '/usr/bin/chromium'),
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    page = await browser.newPage({ viewport: { width, height } });
    page.on('console', (m) => {
      if (m.type() === 'error') {
        consoleErrors.push(m.text().slice(0, 300));
      }
    });
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: timeoutMs });
    await page.waitForSelector('.monaco-workbench', { timeout: timeoutMs });
    // The explorer lists the folder once the remote connection and file service are up.
    await page.waitForSelector('.explorer-folders-view .monaco-list-row', { timeout: timeoutMs });
    return { title: await page.title() };
  },

  /** Ctrl+P, the file's name, Enter; waits until its tab is the active one and focused. */
  async open({ file, timeoutMs = 60_000 }) {
    await quickInput('Control+P', file, file);
    await page
      .locator('.tabs-container .tab.active', { hasText: file })
      .waitFor({ state: 'visible', timeout: timeoutMs });
    await page.waitForSelector('.editor-group-container.active .monaco-editor.focused', { timeout: timeoutMs });
    return true;
  },

  /** F1, the command's title as the palette lists it ("lsp-assist: Restart server"), Enter. */
  async command({ title }) {
    await quickInput('F1', title, title);
    return true;
  },

  async press({ key, times = 1, delayMs = 0 }) {
    for (let i = 0; i < times; i++) {
      await page.keyboard.press(key);
      if (delayMs) {
        await page.waitForTimeout(delayMs);
      }
    }
    return true;
  },

  async type({ text, delayMs = 150 }) {
    await page.keyboard.type(text, { delay: delayMs });
    return true;
  },

  /**
   * A steady typist: each of `keys` ("Enter", or a character typed as text) `delayMs`
   * after the one before, never waiting for an answer; before each key, the ghost text
   * on screen (ghostText). Returns those readings, one per key.
   */
  async typeReading({ keys, delayMs = 180 }) {
    const readings = [];
    for (const key of keys) {
      await page.waitForTimeout(delayMs);
      readings.push(await page.evaluate(ghostText));
      if (key === 'Enter') {
        await page.keyboard.press('Enter');
      } else {
        await page.keyboard.type(key);
      }
    }
    await page.waitForTimeout(delayMs);
    return readings;
  },

  async sleep({ ms }) {
    await page.waitForTimeout(ms);
    return true;
  },

  async status() {
    return statusItem();
  },

  async cursor() {
    return cursor();
  },

  /** Whether the active tab shows unsaved changes. */
  async dirty() {
    return page.evaluate(() => !!document.querySelector('.tabs-container .tab.active.dirty'));
  },

  /** Run one of READERS in the page. */
  async read({ what }) {
    return page.evaluate(READERS[what]);
  },

  async screenshot({ path }) {
    await page.screenshot({ path });
    return path;
  },

  async consoleErrors() {
    return consoleErrors;
  },

  async close() {
    await browser?.close();
    browser = undefined;
    return true;
  },
};

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) {
    continue;
  }
  let answer;
  try {
    const request = JSON.parse(line);
    const op = OPS[request.op];
    if (!op) {
      throw new Error(`unknown op ${request.op}`);
    }
    answer = { ok: true, value: (await op(request)) ?? null };
  } catch (err) {
    answer = { ok: false, error: err instanceof Error ? `${err.message}` : String(err) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
await browser?.close();
