-- Headless Neovim script for test_nvim.py's early-answer test, against the real server.
--
--   nvim --headless --clean -u tests/editors/nvim_early.lua
--
-- Environment: as nvim_init.lua (LSP_ASSIST_TEST_PLUGIN, LSP_ASSIST_TEST_SERVER,
-- LSP_ASSIST_TEST_FILE, LSP_ASSIST_TEST_LINE, LSP_ASSIST_TEST_TYPE,
-- LSP_ASSIST_TEST_SETTINGS with answerAfterMs, LSP_ASSIST_TEST_OUT,
-- LSP_ASSIST_TEST_TIMEOUT_MS).
--
-- Once the model is ready: insert mode at the end of the line, type, and wait for the
-- ghost text (the server's early answer: the suggestion's start); then wait for
-- lspAssist/suggestionReady and the plugin's second request, and write what showed
-- before and after, with the notices and the server's type-through counters, as JSON.
-- With no notice in time (the whole suggestion was no longer than its start), it asks
-- again at the line's end after <Esc>A, up to three times.

local env = vim.env
local out_path = assert(env.LSP_ASSIST_TEST_OUT, 'LSP_ASSIST_TEST_OUT not set')
local timeout_ms = tonumber(env.LSP_ASSIST_TEST_TIMEOUT_MS or '120000')

vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

local assist = require('lsp-assist')
local records = require('lsp-assist.records') -- what the plugin kept (debug_records)
assist.setup({
  cmd = { env.LSP_ASSIST_TEST_SERVER or 'lsp-assist', 'serve' },
  settings = vim.json.decode(env.LSP_ASSIST_TEST_SETTINGS or '{}'),
  debounce_ms = 30,
  status_poll_ms = 200,
  debug_records = true, -- the records this script reads
})

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*/)')
local driver = dofile(here .. 'nvim_driver.lua').new({ timeout_ms = timeout_ms })
local sleep, wait, keys = driver.sleep, driver.wait, driver.keys

local report = { attempts = {} }

local function finish()
  report.timeout = driver.timed_out
  report.lua_error = driver.error
  report.errors = records.errors
  report.notices = records.ready
  report.refreshes = records.refreshes
  report.history = records.history
  local fh = assert(io.open(out_path, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
  driver.quit()
end

local function ghost()
  local g = assist.state.ghost
  return g and g.text or vim.NIL
end

local function run()
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  if not wait(function()
    return assist.state.attached[buf] ~= nil
  end) then
    return
  end
  local client = vim.lsp.get_client_by_id(assist.state.attached[buf])
  report.sent_experimental = client.capabilities.experimental or vim.NIL
  -- While the model loads the answers are empty: start once it is ready.
  report.ready = wait(function()
    return assist.status_info(buf).state == 'ready'
  end)
  local line = tonumber(env.LSP_ASSIST_TEST_LINE or '1')
  vim.api.nvim_win_set_cursor(0, { line, 0 })
  keys('A')
  vim.api.nvim_feedkeys(env.LSP_ASSIST_TEST_TYPE or '', 'nt', false)
  for attempt = 1, 3 do
    local notices = #records.ready
    local refreshes = #records.refreshes
    local shown = wait(function()
      return assist.state.ghost ~= nil
    end, 60000)
    local entry = {
      first = ghost(),
      first_ms = records.last_response and records.last_response.ms or vim.NIL,
      line = vim.api.nvim_get_current_line(),
    }
    table.insert(report.attempts, entry)
    if shown then
      -- ~0.3 s on an idle machine; tens of seconds on a loaded one.
      entry.noticed = wait(function()
        return #records.ready > notices
      end, 60000)
      if entry.noticed then
        entry.refreshed = wait(function()
          return #records.refreshes > refreshes
        end, 10000)
        entry.after = ghost()
        entry.refresh = records.refreshes[#records.refreshes] or vim.NIL
        entry.line_after = vim.api.nvim_get_current_line()
        break
      end
    end
    keys('<Esc>')
    keys('A')
    sleep(100)
  end
  local pending = true
  assist.status(function(err, result)
    local ok = type(result) == 'table'
    report.status = {
      err = err or vim.NIL,
      typethrough = ok and result.typethrough or vim.NIL,
      last = ok and result.last or vim.NIL,
    }
    pending = false
  end)
  wait(function()
    return not pending
  end, 10000)
  keys('<Esc>')
end

driver.run(run, finish)
