-- Headless Neovim script for tests/editors/test_nvim_records.py: the plugin set up as a
-- user does (no debug_records) against nvim_fake_server.lua. It shows a suggestion,
-- accepts it with <Tab>, gets a lspAssist/suggestionReady notice, and writes what the
-- plugin kept in its records (records.lua) and the fields of its state (state.lua), with
-- what the fake server received, as JSON.
--
--   nvim --headless --clean -u tests/editors/nvim_records.lua
--
-- Environment: LSP_ASSIST_TEST_PLUGIN (editors/nvim), LSP_ASSIST_TEST_FILE (opened; the
-- scenario works on its last line), LSP_ASSIST_TEST_OUT (JSON report written here).

local env = vim.env
local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*/)')
vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

local fake = dofile(here .. 'nvim_fake_server.lua')
fake.items = { 'total([1]))' }
local assist = require('lsp-assist')
local records = require('lsp-assist.records') -- what the plugin kept (debug_records)
local next_edit = require('lsp-assist.next_edit')
assist.setup({ cmd = fake.cmd, debounce_ms = 20, status_poll_ms = 40 })

local driver = dofile(here .. 'nvim_driver.lua').new({ timeout_ms = 30000, wait_ms = 3000 })
local report = {}

local function finish()
  report.error = driver.error or vim.NIL
  report.kept = {
    requests = records.requests,
    responses = records.responses,
    last_request = records.last_request or vim.NIL,
    last_response = records.last_response or vim.NIL,
    history = #records.history,
    accepted = #records.accepted,
    telemetry = #records.telemetry,
    ready = #records.ready,
    refreshes = #records.refreshes,
    typed_answers = #records.typed_answers,
    cursor_reports = #records.cursor_reports,
    errors = #records.errors,
    next_edit_requests = #next_edit.state.requests,
    next_edit_count = next_edit.state.count,
  }
  -- What the plugin keeps while it runs, after a whole session: no record among it.
  report.state_fields = vim.tbl_keys(assist.state)
  report.received = {
    inline = #fake.requests('textDocument/inlineCompletion'),
    shown = #vim.tbl_filter(function(entry)
      return entry.method == 'textDocument/didShowCompletion'
    end, fake.log),
    accepted = #fake.accepted,
  }
  local fh = assert(io.open(env.LSP_ASSIST_TEST_OUT, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
  vim.cmd('qa!')
end

driver.run(function()
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  driver.wait(function()
    return assist.state.attached[buf] ~= nil
  end)
  vim.cmd('normal! G')
  driver.keys('A')
  report.ghost = driver.wait(function()
    return assist.state.ghost ~= nil
  end) and assist.state.ghost.text
  local uri = vim.uri_from_bufnr(buf)
  local cursor = vim.api.nvim_win_get_cursor(0)
  fake.notify('lspAssist/suggestionReady', {
    textDocument = { uri = uri, version = 1 }, position = { line = cursor[1] - 1, character = cursor[2] },
  })
  driver.sleep(100)
  driver.keys('<Tab>')
  driver.wait(function()
    return #fake.accepted > 0
  end)
  report.line = vim.api.nvim_get_current_line()
  driver.keys('<Esc>')
  driver.sleep(50)
end, finish)
