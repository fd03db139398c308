-- Headless Neovim script for tests/editors/test_nvim.py, against the real server.
--
--   nvim --headless --clean -u tests/editors/nvim_init.lua
--
-- Environment: LSP_ASSIST_TEST_PLUGIN (editors/nvim), LSP_ASSIST_TEST_SERVER (the
-- lsp-assist executable), LSP_ASSIST_TEST_FILE, LSP_ASSIST_TEST_LINE (1-based; the
-- cursor goes to its end), LSP_ASSIST_TEST_TYPE (text typed there in insert mode),
-- LSP_ASSIST_TEST_SETTINGS (JSON), LSP_ASSIST_TEST_OUT (JSON written here),
-- LSP_ASSIST_TEST_TIMEOUT_MS, LSP_ASSIST_TEST_METHOD (the plugin's `method` option:
-- 'auto', or 'completion' for the textDocument/completion fallback).
--
-- It does what a user does: opens the file (the plugin starts and attaches the server),
-- enters insert mode at the end of the line (the plugin asks on InsertEnter), types (it
-- asks after its debounce), waits for the ghost text (asking again with the trigger key
-- while the model loads), accepts a word with <M-Right> and the rest with <Tab> (the
-- plugin reports lspAssist.accept), asks with <C-o>:LspAssistComplete and cycles with
-- <M-]>, runs the explain and status commands, and writes what it saw as JSON, with the
-- statusline sampled all along.

local env = vim.env
local out_path = assert(env.LSP_ASSIST_TEST_OUT, 'LSP_ASSIST_TEST_OUT not set')
local timeout_ms = tonumber(env.LSP_ASSIST_TEST_TIMEOUT_MS or '90000')
local started = vim.uv.now()

vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

local assist = require('lsp-assist')
local records = require('lsp-assist.records') -- what the plugin kept (debug_records)
local settings = vim.json.decode(env.LSP_ASSIST_TEST_SETTINGS or '{}')
assist.setup({
  cmd = { env.LSP_ASSIST_TEST_SERVER or 'lsp-assist', 'serve' },
  settings = settings,
  debounce_ms = 30,
  status_poll_ms = 200,
  method = env.LSP_ASSIST_TEST_METHOD or 'auto',
  debug_records = true, -- the records this script reads
})

local report = {
  nvim = tostring(vim.version()),
  steps = {},
  responses = {},
  statuslines = {},
}

local function step(name)
  table.insert(report.steps, { name = name, ms = vim.uv.now() - started })
end

-- The statusline component, sampled every 20 ms (each change once).
local sampler = vim.uv.new_timer()
sampler:start(0, 20, vim.schedule_wrap(function()
  local text = assist.statusline()
  if report.statuslines[#report.statuslines] ~= text then
    table.insert(report.statuslines, text)
  end
end))

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*/)')
local driver = dofile(here .. 'nvim_driver.lua').new({ timeout_ms = timeout_ms })
local sleep, wait, keys = driver.sleep, driver.wait, driver.keys

local function finish()
  sampler:stop()
  report.timeout = driver.timed_out
  report.lua_error = driver.error
  local state = assist.state
  report.setup = state.setup
  report.builtin = state.builtin
  report.clients = vim.tbl_values(state.clients)
  report.attached = next(state.attached) ~= nil
  report.requests = records.requests
  report.response_count = records.responses
  report.last_request = records.last_request
  report.last_response = records.last_response
  report.accepted = records.accepted
  report.partial = records.partial
  report.history = records.history
  report.errors = records.errors
  local buf = vim.api.nvim_get_current_buf()
  report.buffer = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local clients = vim.lsp.get_clients({ name = 'lsp_assist' })
  report.lsp_clients = #clients
  if clients[1] then
    report.client_initialized = clients[1].initialized == true
    report.offset_encoding = clients[1].offset_encoding
  end
  local encoded = vim.json.encode(report)
  local fh = assert(io.open(out_path, 'w'))
  fh:write(encoded)
  fh:close()
  driver.quit()
end

local line = tonumber(env.LSP_ASSIST_TEST_LINE or '1')
local typed = env.LSP_ASSIST_TEST_TYPE or ''

local function record_response()
  local response = records.last_response
  table.insert(report.responses, {
    method = response.method,
    err = response.err,
    items = #response.items,
    stale = response.stale,
    ms = vim.uv.now() - started,
  })
end

--- Wait for the next answer after `count` answers; record it.
local function next_response(count)
  local ok = wait(function()
    return records.responses > count
  end)
  if ok then
    record_response()
  end
  return ok
end

local function run()
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  step('opened')
  if not wait(function()
    return assist.state.attached[buf] ~= nil
  end) then
    return
  end
  step('attached')

  -- Entering insert mode at the end of the line asks, before anything is typed.
  vim.api.nvim_win_set_cursor(0, { line, 0 })
  keys('A')
  if not wait(function()
    return records.requests > 0
  end) then
    return
  end
  report.insert_enter_request = vim.deepcopy(records.last_request)
  report.requests_before_typing = records.requests

  -- Typing: InsertCharPre / TextChangedI, then the debounce, then the request.
  local count = records.responses
  vim.api.nvim_feedkeys(typed, 'nt', false)
  wait(function()
    return records.requests > report.requests_before_typing
  end)
  report.typed_request = records.requests > report.requests_before_typing
  if not next_response(count) then
    return
  end
  step('first response')
  -- No ghost yet (empty answer, or the model still loading): ask with the trigger key.
  local attempts = 0
  while not assist.state.ghost and attempts < 20 and not records.last_response.err do
    attempts = attempts + 1
    sleep(300)
    count = records.responses
    keys('<M-\\>')
    if not next_response(count) then
      return
    end
  end
  report.trigger_attempts = attempts

  if assist.state.ghost then
    step('ghost')
    report.ghost_text = assist.state.ghost.text
    report.typed_line = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]
    report.ghost_extmarks = #vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = false })
    -- A word first (<M-Right>), then the rest (<Tab>), as typed keys through the mappings.
    -- What shows when the key is pressed (an answer may have replaced it meanwhile).
    report.ghost_at_key = assist.state.ghost and assist.state.ghost.text or vim.NIL
    report.line_at_key = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]
    keys('<M-Right>')
    report.after_word = {
      line = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1],
      ghost = assist.state.ghost and assist.state.ghost.text or vim.NIL,
    }
    keys('<Tab>')
    wait(function()
      local record = records.accepted[1]
      return record ~= nil and (record.response ~= nil or record.command == nil)
    end)
    step('accepted')
    report.accept_line = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]
    report.mode_after_accept = vim.api.nvim_get_mode().mode
  end

  -- <C-o>:LspAssistComplete asks from insert mode; its answer is not dropped as stale.
  if not assist.state.builtin and assist.config.method ~= 'completion' then
    keys('<C-]>')
    local answered = #records.history
    keys('<C-o>:LspAssistComplete<CR>')
    wait(function()
      for i = answered + 1, #records.history do
        if records.history[i].invoked then
          return true
        end
      end
      return false
    end)
    report.ctrl_o = vim.list_slice(records.history, answered + 1)
    report.ctrl_o_ghost = assist.state.ghost ~= nil
    keys('<C-]>')
  end
  -- Cycling: back to the line as it was when the first suggestion showed, <M-\\> asks
  -- explicitly, the server answers with its alternatives; <M-]> shows the second,
  -- <M-[> the first again.
  if report.typed_line and not assist.state.builtin and assist.config.method ~= 'completion' then
    local row = vim.api.nvim_win_get_cursor(0)[1]
    vim.api.nvim_buf_set_lines(buf, line - 1, row, false, { report.typed_line })
    vim.api.nvim_win_set_cursor(0, { line, #report.typed_line })
    local function shown()
      local ghost = assist.state.ghost
      if not ghost then
        return vim.NIL
      end
      return { index = ghost.index, count = ghost.count, text = ghost.text }
    end
    count = records.responses
    keys('<M-\\>')
    next_response(count)
    local items = {}
    for _, item in ipairs(assist.state.items or {}) do
      table.insert(items, item.text)
    end
    report.cycle = { first = shown(), items = items }
    keys('<M-]>')
    report.cycle.second = shown()
    keys('<M-[>')
    report.cycle.back = shown()
    report.cycle.line = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]
    report.cycle.errors = #records.errors
  end
  keys('<Esc>')

  step('commands')
  local pending = 2
  assist.explain(function(err, result)
    report.explain = {
      err = err,
      has_text = type(result) == 'table' and type(result.text) == 'string',
      keys = type(result) == 'table' and vim.tbl_keys(result) or nil,
    }
    pending = pending - 1
  end)
  assist.status(function(err, result)
    report.status = { err = err, result = result }
    pending = pending - 1
  end)
  wait(function()
    return pending == 0
  end)
  wait(function()
    return assist.status_info(buf).state == 'ready'
  end)
  report.final_status = assist.status_info(buf)
  step('done')
end

driver.run(run, finish)
