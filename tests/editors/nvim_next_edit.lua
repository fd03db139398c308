-- Headless Neovim script for tests/editors/test_next_edit_nvim.py: next edits
-- (textDocument/copilotInlineEdit) from the real server, as a user gets them.
--
--   nvim --headless --clean -u tests/editors/nvim_next_edit.lua
--
-- Environment: LSP_ASSIST_TEST_PLUGIN (editors/nvim), LSP_ASSIST_TEST_SERVER,
-- LSP_ASSIST_TEST_FILE (shapes.py: `area` used on line 2, defined on line 5 with three
-- parameters, called on lines 10 and 13), LSP_ASSIST_TEST_SETTINGS (JSON),
-- LSP_ASSIST_TEST_OUT (JSON written here), LSP_ASSIST_TEST_TIMEOUT_MS.
--
-- Typed keys only: rename `area` at its definition (ciw), the next edit shows at the use
-- ABOVE the cursor; <Tab> jumps there, <Tab> applies it (the command goes to the
-- server); the next one shows below; <Esc> dismisses it, :LspAssistNextEdit asks
-- again; typing elsewhere dismisses another; removing the parameter `depth` shows the deletion of a call's argument,
-- which <Tab> <Tab> applies; lspAssist.nextEditStats at the end.

local env = vim.env
local out_path = assert(env.LSP_ASSIST_TEST_OUT, 'LSP_ASSIST_TEST_OUT not set')
local timeout_ms = tonumber(env.LSP_ASSIST_TEST_TIMEOUT_MS or '90000')

vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

local assist = require('lsp-assist')
local next_edit = require('lsp-assist.next_edit')
assist.setup({
  cmd = { env.LSP_ASSIST_TEST_SERVER or 'lsp-assist', 'serve' },
  settings = vim.json.decode(env.LSP_ASSIST_TEST_SETTINGS or '{}'),
  debounce_ms = 30,
  status_poll_ms = 200,
  next_edit = { debounce_ms = 50 },
  debug_records = true, -- the records this script reads
})

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*/)')
local driver = dofile(here .. 'nvim_driver.lua').new({ timeout_ms = timeout_ms })
local wait, keys = driver.wait, driver.keys
local report = { steps = {} }
local buf

local function lines()
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- What shows: the edit, the cursor, and the extmarks of the next-edit namespace.
local function snapshot()
  local shown = next_edit.state.shown
  local ns = vim.api.nvim_get_namespaces()['lsp-assist.next-edit']
  local marks = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d = m[4]
    table.insert(marks, {
      row = m[2],
      col = m[3],
      end_row = d.end_row,
      end_col = d.end_col,
      hl_group = d.hl_group,
      virt_text = d.virt_text,
      virt_text_pos = d.virt_text_pos,
    })
  end
  return {
    edit = shown and shown.edit or vim.NIL,
    visible = next_edit.visible(buf),
    cursor = vim.api.nvim_win_get_cursor(0),
    marks = marks,
    lines = lines(),
  }
end

local function step(name)
  local s = snapshot()
  s.name = name
  table.insert(report.steps, s)
  return s
end

--- Wait until a next edit whose text satisfies `pred` shows (after `count` shown).
local function shown_after(count, pred)
  return wait(function()
    local shown = next_edit.state.shown
    return next_edit.state.count > count and shown ~= nil and next_edit.visible(buf)
      and (pred == nil or pred(shown.edit))
  end, 30000)
end

local function accepted_answer(n)
  return wait(function()
    local record = next_edit.state.accepted[n]
    return record ~= nil and record.response ~= nil
  end, 30000)
end

local function run()
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  buf = vim.api.nvim_get_current_buf()
  if not wait(function()
    local client = vim.lsp.get_clients({ bufnr = buf, name = 'lsp_assist' })[1]
    return client ~= nil and client.initialized
  end) then
    return
  end
  local client = vim.lsp.get_clients({ bufnr = buf, name = 'lsp_assist' })[1]
  report.commands = client.server_capabilities.executeCommandProvider.commands

  -- Rename the definition on line 5: the next edit is the use on line 2, above.
  vim.api.nvim_win_set_cursor(0, { 5, 4 })
  local count = next_edit.state.count
  keys('ciwsurface<Esc>')
  if not shown_after(count) then
    return
  end
  step('renamed')
  keys('<Tab>')
  step('jumped')
  count = next_edit.state.count
  keys('<Tab>')
  step('applied')
  accepted_answer(1)
  report.accept_response = next_edit.state.accepted[1].response
  -- The change asked again: the next remaining reference, below.
  if not shown_after(count) then
    return
  end
  step('next')
  keys('<Esc>')
  step('dismissed')

  -- :LspAssistNextEdit asks again; apply that one, and the last reference shows.
  count = next_edit.state.count
  keys(':LspAssistNextEdit<CR>')
  if not shown_after(count) then
    return
  end
  step('asked again')
  count = next_edit.state.count
  keys('<Tab>')
  keys('<Tab>')
  accepted_answer(2)
  if not shown_after(count) then
    return
  end
  step('before typing elsewhere')
  keys('Go# done<Esc>')
  wait(function()
    return not next_edit.visible(buf)
  end, 10000)
  step('typed elsewhere')

  -- Remove the parameter `depth`: the next edit deletes a call's third argument.
  vim.api.nvim_win_set_cursor(0, { 5, 0 })
  count = next_edit.state.count
  keys('f,;dt)')
  if not shown_after(count, function(edit)
    return edit.text == ''
  end) then
    return
  end
  step('parameter removed')
  keys('<Tab>')
  step('deletion jumped')
  keys('<Tab>')
  step('deletion applied')
  accepted_answer(3)

  local stats = client:request_sync('workspace/executeCommand', { command = 'lspAssist.nextEditStats' }, 10000, buf)
  report.stats = stats and stats.result
end

local function finish()
  report.timeout = driver.timed_out
  report.lua_error = driver.error
  report.errors = next_edit.state.errors
  report.requests = next_edit.state.requests
  report.final = buf and lines() or vim.NIL
  local fh = assert(io.open(out_path, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
  driver.quit()
end

driver.run(run, finish)
