-- Headless Neovim script for the key, status and enable/disable tests of editors/nvim.
--
--   nvim --headless --clean -u tests/editors/nvim_keys.lua
--
-- The plugin talks to nvim_fake_server.lua (an in-process LSP server with fixed
-- answers), so the exact text each key inserts can be checked. Keys are fed as typed
-- (nvim_feedkeys 'mt': through the plugin's insert-mode mappings).
--
-- Environment: LSP_ASSIST_TEST_PLUGIN (editors/nvim), LSP_ASSIST_TEST_FILE (opened; the
-- scenario works on its last line), LSP_ASSIST_TEST_OUT (JSON report written here).
-- LSP_ASSIST_TEST_INTERACTIVE=1: set up and stop there (tmux drives the keys).

local env = vim.env
local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*/)')
vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'
vim.o.termguicolors = false -- as in tmux without truecolor: cterm colours only
vim.o.statusline = "%f %{v:lua.require'lsp-assist'.statusline()}"
vim.o.laststatus = 2

local fake = dofile(here .. 'nvim_fake_server.lua')
local ITEMS = { '1, 2))\n    print(total([3]))', 'total([1]))', 'scale([2], 2)[0])' }
fake.items = ITEMS
local assist = require('lsp-assist')
local records = require('lsp-assist.records') -- what the plugin kept (debug_records)
assist.setup({ cmd = fake.cmd, debounce_ms = 20, status_poll_ms = 40, debug_records = true })

if env.LSP_ASSIST_TEST_FAKE_DELAY_MS then
  fake.delay_ms = tonumber(env.LSP_ASSIST_TEST_FAKE_DELAY_MS)
end
fake.typethrough = env.LSP_ASSIST_TEST_FAKE_TYPETHROUGH == '1'

if env.LSP_ASSIST_TEST_INTERACTIVE == '1' then
  -- After startup, when filetype detection is on.
  vim.api.nvim_create_autocmd('VimEnter', {
    nested = true, -- so that editing the file runs its FileType autocmds
    callback = function()
      vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
      vim.cmd('normal! G$')
    end,
  })
  return
end

local report = { checks = {}, errors = {}, section_errors = vim.empty_dict() }
local started = vim.uv.now()
local driver = dofile(here .. 'nvim_driver.lua').new({ timeout_ms = 60000, wait_ms = 3000 })
local sleep, wait, keys = driver.sleep, driver.wait, driver.keys

local function check(name, value)
  report.checks[name] = value
end

local function line()
  return vim.api.nvim_get_current_line()
end

local function ghost()
  local g = assist.state.ghost
  return g and g.text or vim.NIL
end

local function inline_requests()
  return #fake.requests('textDocument/inlineCompletion')
end

local function last_inline()
  local all = fake.requests('textDocument/inlineCompletion')
  return all[#all].params
end

local function hl()
  local h = vim.api.nvim_get_hl(0, { name = 'LspAssistGhost', link = false })
  return { ctermfg = h.ctermfg, fg = h.fg }
end

local function finish()
  report.ms = vim.uv.now() - started
  if driver.error then
    table.insert(report.errors, driver.error)
  end
  report.plugin_errors = records.errors
  local fh = assert(io.open(env.LSP_ASSIST_TEST_OUT, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
  vim.cmd('qa!')
end

--- Run one part of the scenario; an error there is recorded and the next part runs.
local function section(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    report.section_errors[name] = err
  end
end

local function invoked_answers(from)
  return vim.tbl_filter(function(entry)
    return entry.invoked
  end, vim.list_slice(records.history or {}, from + 1))
end

local before, answered, buf

local function has_ghost()
  return assist.state.ghost ~= nil
end

--- Press `key` with nothing on screen; the suggestion it brought and the request sent.
local function ask(key)
  keys('<C-]>')
  before = inline_requests()
  keys(key)
  wait(has_ghost)
  return { ghost = ghost(), requests = inline_requests() - before, kind = last_inline().context.triggerKind }
end

local function scenario()
  check('highlight', hl())
  fake.ready = false
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  buf = vim.api.nvim_get_current_buf()
  check('attached', wait(function()
    return assist.state.attached[buf] ~= nil
  end))

  -- Status: polled lspAssist.status says loading, then ready; $/progress too.
  section('status', function()
    check('status_polled_loading', wait(function()
      return assist.statusline():find('loading') ~= nil
    end))
    fake.ready = true
    check('status_polled_ready', wait(function()
      return assist.statusline():find('ready') ~= nil
    end))
    fake.ready = false
    fake.progress('begin', { title = 'lsp-assist: loading model', percentage = 10 })
    check('status_progress_loading', wait(function()
      return assist.statusline():find('loading model 10%%') ~= nil
    end) and assist.statusline())
    fake.ready = true
    fake.progress('end', { message = 'loaded' })
    check('status_progress_ready', wait(function()
      return assist.statusline() == 'lsp-assist: ready'
    end) and assist.statusline())
  end)

  -- InsertEnter asks (Automatic: one item).
  section('insert_enter', function()
    vim.cmd('normal! G')
    check('insert_enter', ask('A'))
    check('statusline_latency', assist.statusline())
  end)

  -- Accept word, word, line, line (the last one completes the suggestion).
  section('accept_parts', function()
    keys('<M-Right>')
    check('word1', { line = line(), ghost = ghost() })
    keys('<M-Right>')
    check('word2', { line = line(), ghost = ghost() })
    keys('<M-C-Right>')
    check('line1', { line = line(), ghost = ghost(), accepted = #fake.accepted })
    keys('<M-C-Right>')
    wait(function()
      return #fake.accepted > 0
    end)
    check('line2', {
      lines = vim.api.nvim_buf_get_lines(buf, -3, -1, false),
      ghost = ghost(),
      fake_accepted = vim.deepcopy(fake.accepted),
      inserted = records.accepted[1] and records.accepted[1].inserted,
    })
  end)

  -- Manual trigger <M-\> (Invoked: all items), dismiss <C-]>.
  section('trigger_dismiss', function()
    wait(has_ghost, 500) -- the request after accepting (CursorMovedI)
    local text_before = line()
    check('trigger', ask('<M-\\>'))
    keys('<C-]>')
    check('dismiss', { ghost = ghost(), line = line(), unchanged = line() == text_before })
  end)

  -- Cycle through the three items of an Invoked answer, accept the one shown.
  section('cycle', function()
    ask('<M-\\>')
    local seen = { { index = assist.state.ghost.index, count = assist.state.ghost.count } }
    for _, key in ipairs({ '<M-]>', '<M-]>', '<M-]>', '<M-[>' }) do
      keys(key)
      table.insert(seen, { index = assist.state.ghost.index, text = ghost(), status = assist.statusline() })
    end
    check('cycle', seen)
    local accepted_before = #fake.accepted
    keys('<Tab>')
    wait(function()
      return #fake.accepted > accepted_before
    end)
    check('cycle_accept', { line = line(), argument = fake.accepted[#fake.accepted] })
  end)

  -- After an Automatic answer (one item), <M-]> asks again, explicitly.
  section('cycle_after_auto', function()
    keys('<Esc>')
    ask('A')
    check('auto_count', assist.state.ghost.count)
    before = inline_requests()
    keys('<M-]>')
    wait(function()
      return assist.state.ghost ~= nil and assist.state.ghost.index == 2
    end)
    check('cycle_after_auto', {
      requests = inline_requests() - before,
      kind = last_inline().context.triggerKind,
      ghost = ghost(),
      index = assist.state.ghost and assist.state.ghost.index,
    })
  end)

  -- Moving the cursor in insert mode asks at the new place.
  section('cursor_moved', function()
    keys('<C-]>')
    local col = vim.api.nvim_win_get_cursor(0)[2]
    before = inline_requests()
    keys('<Left>')
    wait(function()
      return inline_requests() > before
    end, 1000)
    check('cursor_moved', {
      requests = inline_requests() - before,
      character = last_inline().position.character,
      col = col,
    })
    keys('<End>')
    sleep(100)
  end)

  -- <C-o>:LspAssistComplete: the answer is not dropped as stale.
  section('ctrl_o', function()
    -- At the end of the line in insert mode, nothing on screen, nothing on its way.
    keys('<Esc>')
    keys('A')
    sleep(150)
    keys('<C-]>')
    fake.delay_ms = 60
    answered = #(records.history or {})
    local responses = records.responses
    keys('<C-o>:LspAssistComplete<CR>')
    wait(function()
      return records.responses > responses and assist.state.ghost ~= nil
    end, 1500)
    check('ctrl_o_complete', {
      invoked = invoked_answers(answered),
      last_stale = records.last_response and records.last_response.stale,
      ghost = ghost(),
      count = assist.state.ghost and assist.state.ghost.count,
      mode = vim.api.nvim_get_mode().mode,
      character = last_inline().position.character,
      line_length = #line(),
    })
  end)

  -- :LspAssistComplete from normal mode: insert mode after the cursor, and the answer.
  section('normal_complete', function()
    keys('<Esc>')
    vim.cmd('normal! $')
    answered = #(records.history or {})
    keys(':LspAssistComplete<CR>')
    wait(function()
      return #invoked_answers(answered) > 0 and assist.state.ghost ~= nil
    end, 2000)
    check('normal_complete', {
      invoked = invoked_answers(answered),
      ghost = ghost(),
      mode = vim.api.nvim_get_mode().mode,
      character = last_inline().position.character,
      line_length = #line(),
    })
  end)

  -- Thinking while a request is out.
  section('thinking', function()
    -- 450 ms against the test's 400 ms bound: the fake's timer and the plugin's clock
    -- round differently (399 ms was seen)
    fake.delay_ms = 450
    keys('<C-]>')
    keys('<M-\\>')
    sleep(100)
    check('thinking', assist.statusline())
    wait(has_ghost)
    fake.delay_ms = 10
    check('after_thinking', assist.statusline())
  end)

  -- Enable / disable: per filetype, globally, per buffer.
  section('enable_disable', function()
    local function quiet_insert()
      keys('<Esc>')
      before = inline_requests()
      keys('A')
      sleep(150)
      return { requests = inline_requests() - before, ghost = ghost(), status = assist.statusline() }
    end
    local steps = {
      { 'LspAssistDisable python', 'disabled_ft' },
      { 'LspAssistEnable python', 'enabled_ft' },
      { 'LspAssistDisable', 'disabled_all' },
      { 'LspAssistEnable | LspAssistToggle', 'disabled_buffer' },
      { 'LspAssistToggle', 'enabled_buffer' },
    }
    for _, s in ipairs(steps) do
      keys('<Esc>')
      vim.cmd(s[1])
      check(s[2], quiet_insert())
    end
    keys('<Esc>')
  end)

  -- lspAssist/suggestionReady (early answers): the capability is sent; a notice for the
  -- suggestion on screen asks again (Automatic) and shows the longer text; the same text
  -- is not redrawn; after typing into it the notice still applies; a dismissed
  -- suggestion, another buffer, normal mode or a request in flight ignore it.
  section('suggestion_ready', function()
    local init = fake.requests('initialize')[1]
    check('ready_capability', init.params.capabilities.experimental or vim.NIL)
    local uri = vim.uri_from_bufnr(buf)
    local function notice(position, other_uri)
      return { textDocument = { uri = other_uri or uri, version = 1 }, position = position }
    end
    --- Send a notice; what the plugin did with it, and the requests it sent.
    local function notify(params)
      local count = inline_requests()
      local notices = #records.ready
      local refreshes = #records.refreshes
      fake.notify('lspAssist/suggestionReady', params)
      wait(function()
        return #records.ready > notices
      end, 1000)
      local entry = records.ready[#records.ready]
      if entry and entry.action == 'refresh' then
        wait(function()
          return #records.refreshes > refreshes
        end, 1000)
      else
        sleep(60)
      end
      return {
        action = entry and entry.action or vim.NIL,
        requests = inline_requests() - count,
        kind = inline_requests() > count and last_inline().context.triggerKind or vim.NIL,
        ghost = ghost(),
        extmark = assist.state.ghost and assist.state.ghost.extmark or vim.NIL,
        refresh = #records.refreshes > refreshes and records.refreshes[#records.refreshes] or vim.NIL,
      }
    end
    local items = fake.items
    keys('<Esc>')
    fake.items = { '1, ' }
    local first = ask('A')
    local position = last_inline().position
    fake.items = { '1, 2))' }
    local longer = notify(notice(position))
    local same = notify(notice(position))
    check('ready_refresh', { first = first, longer = longer, same = same })
    -- Typing into it: the typed character matches; the plugin asks at the new place.
    fake.items = { ', 2' }
    before = inline_requests()
    keys('1')
    wait(function()
      return ghost() == ', 2'
    end)
    fake.items = { ', 2))' }
    check('ready_after_typing', notify(notice(position)))
    -- Ignored: another document, a malformed notice, a request in flight, a dismissed
    -- suggestion, normal mode.
    local ignored = {}
    ignored.other_buffer = notify(notice(position, 'file:///elsewhere/other.py'))
    ignored.malformed = notify({ position = position })
    fake.delay_ms = 300
    local responses = records.responses
    keys('<M-\\>')
    ignored.in_flight = notify(notice(position))
    wait(function()
      return records.responses > responses
    end)
    fake.delay_ms = 10
    keys('<C-]>')
    ignored.dismissed = notify(notice(position))
    ask('<M-\\>')
    keys('<Esc>')
    ignored.normal_mode = notify(notice(position))
    check('ready_ignored', ignored)
    fake.items = items
  end)

  -- The highlight: the user's colour wins; a colour scheme change restores the plugin's.
  section('highlight', function()
    vim.cmd('highlight LspAssistGhost ctermfg=1 guifg=#ff0000')
    assist.set_highlight()
    check('highlight_user', hl())
    vim.cmd('colorscheme default')
    check('highlight_after_colorscheme', hl())
  end)

  -- A server command that is not executable is reported at setup.
  section('bad_cmd', function()
    local notes = {}
    local notify = vim.notify
    vim.notify = function(msg, level)
      table.insert(notes, { msg = msg, level = level })
    end
    local ok = assist.setup({ cmd = { '/nonexistent/bin/lsp-assist', 'serve' }, debug_records = true })
    vim.notify = notify
    check('bad_cmd', { setup = ok, notes = notes, error_level = vim.log.levels.ERROR, status = assist.state.status })
  end)
end

driver.run(scenario, finish)
