-- Next edits (issue 22): after a change, ask the server's textDocument/copilotInlineEdit
-- (GitHub Copilot's method, docs/editors.md "Next edits") and show the first edit of
-- this buffer: the replaced range highlighted, the new text as virtual text after it
-- (a deletion: the range struck through). The key (normal mode, `<Tab>` by default)
-- jumps to it, and the same key again applies it and runs the edit's command
-- (github.copilot.didAcceptNextEditSuggestionItem), so the server counts it; the
-- change it makes asks for the next one. A change elsewhere or <Esc> dismisses it.
--
--   require('lsp-assist').setup({ next_edit = { key = '<Tab>', debounce_ms = 150 } })

local M = {}

local api = vim.api
local records = require('lsp-assist.records')

local NAME = 'lsp_assist'
local METHOD = 'textDocument/copilotInlineEdit'
local DID_SHOW = 'textDocument/didShowInlineEdit'
local ns = api.nvim_create_namespace('lsp-assist.next-edit')

M.defaults = {
  --- false: never ask for next edits (the server's `nextEdit` setting can be off too).
  enabled = true,
  --- Pause after the last change before asking.
  debounce_ms = 150,
  --- Normal-mode key: jump to the next edit, then apply it (false: not mapped). Without
  --- a next edit on screen it is the plain key.
  key = '<Tab>',
  --- Normal-mode key that dismisses a shown next edit (and is the plain key as well).
  dismiss = '<Esc>',
}

M.config = vim.deepcopy(M.defaults)

--- What the plugin saw. `shown` is what shows; the rest are records the tests read, kept
--- only with debug_records (records.lua). `shown`: { bufnr, edit, tick, jumped, marks };
--- `requests`: the last 50 { tick, position, edits (count), stale, err };
--- `accepted`: { edit, text (the buffer's lines after), response = { err, result } }.
M.state = { shown = nil, requests = {}, accepted = {}, errors = {}, count = 0 }

local timers = {} -- bufnr -> uv timer
local pending = {} -- bufnr -> { client_id, request_id }
local own_tick = {} -- bufnr -> changedtick right after the plugin applied an edit

local push = records.push -- kept only with setup({ debug_records = true })

local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = NAME })[1]
end

function M.set_highlight()
  -- `default`: a colour scheme or the user's :highlight wins.
  api.nvim_set_hl(0, 'LspAssistNextEditRange', { link = 'DiffDelete', default = true })
  api.nvim_set_hl(0, 'LspAssistNextEditText', { link = 'DiffAdd', default = true })
  -- (a link would drop the strikethrough: attributes beside `link` are ignored)
  api.nvim_set_hl(0, 'LspAssistNextEditDelete', {
    strikethrough = true, fg = '#e06c75', ctermfg = 9, default = true,
  })
  api.nvim_set_hl(0, 'LspAssistNextEditHint', { link = 'Comment', default = true })
end

--- Byte column of an LSP position in the buffer.
local function byte_col(bufnr, position, encoding)
  local line = api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  if encoding == 'utf-8' then
    return math.min(position.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding or 'utf-16', position.character, false)
  if ok and type(col) == 'number' then
    return math.min(col, #line)
  end
  return math.min(position.character, #line)
end

local function clear_marks(bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

--- Remove the shown next edit (and cancel the request on its way) in `bufnr`
--- (default: wherever it shows).
function M.dismiss(bufnr)
  local shown = M.state.shown
  if shown and (bufnr == nil or shown.bufnr == bufnr) then
    clear_marks(shown.bufnr)
    M.state.shown = nil
  end
  local out = bufnr and pending[bufnr]
  if out then
    local client = vim.lsp.get_client_by_id(out.client_id)
    if client then
      pcall(function()
        client:cancel_request(out.request_id)
      end)
    end
    pending[bufnr] = nil
  end
end

function M.visible(bufnr)
  local shown = M.state.shown
  return shown ~= nil and shown.bufnr == (bufnr or api.nvim_get_current_buf())
    and shown.tick == api.nvim_buf_get_changedtick(shown.bufnr)
end

--- Extmarks for `edit`: the range highlighted (struck through for a deletion), the new
--- text inline after it (further lines as virtual lines), a hint at the end of the line.
local function draw(bufnr, edit, encoding)
  local range = edit.range
  local srow, erow = range.start.line, range['end'].line
  local line_count = api.nvim_buf_line_count(bufnr)
  if srow >= line_count or erow >= line_count then
    return nil
  end
  local scol = byte_col(bufnr, range.start, encoding)
  local ecol = byte_col(bufnr, range['end'], encoding)
  local deletion = edit.text == ''
  local marks = {}
  local empty = srow == erow and scol == ecol
  if not empty then
    table.insert(marks, api.nvim_buf_set_extmark(bufnr, ns, srow, scol, {
      end_row = erow,
      end_col = ecol,
      hl_group = deletion and 'LspAssistNextEditDelete' or 'LspAssistNextEditRange',
      priority = 200,
    }))
  end
  if not deletion then
    local lines = vim.split(edit.text, '\n', { plain = true })
    local opts = {
      virt_text = { { lines[1], 'LspAssistNextEditText' } },
      virt_text_pos = 'inline',
      priority = 200,
    }
    if #lines > 1 then
      opts.virt_lines = {}
      for i = 2, #lines do
        table.insert(opts.virt_lines, { { lines[i], 'LspAssistNextEditText' } })
      end
    end
    table.insert(marks, api.nvim_buf_set_extmark(bufnr, ns, erow, ecol, opts))
  end
  local key = M.config.key or 'the key'
  local hint = deletion and ('  next edit: delete (%s)'):format(key) or ('  next edit (%s)'):format(key)
  table.insert(marks, api.nvim_buf_set_extmark(bufnr, ns, srow, 0, {
    virt_text = { { hint, 'LspAssistNextEditHint' } },
    virt_text_pos = 'eol',
    priority = 200,
  }))
  return { marks = marks, row = srow, col = scol, deletion = deletion }
end

local function show(bufnr, client, edit)
  M.dismiss(bufnr)
  local ok, drawn = pcall(draw, bufnr, edit, client.offset_encoding)
  if not ok or not drawn then
    push(M.state.errors, { where = 'draw', err = drawn })
    clear_marks(bufnr)
    return
  end
  M.state.shown = {
    bufnr = bufnr,
    edit = edit,
    tick = api.nvim_buf_get_changedtick(bufnr),
    row = drawn.row,
    col = drawn.col,
    deletion = drawn.deletion,
    jumped = false,
    client_id = client.id,
  }
  records.count(M.state, 'count')
  client:notify(DID_SHOW, { item = { command = edit.command } })
end

--- Ask for the next edits at the cursor of the current window (showing `bufnr`).
function M.request(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  if not M.config.enabled or api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local client = client_for(bufnr)
  if not client then
    return
  end
  M.dismiss(bufnr)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local tick = api.nvim_buf_get_changedtick(bufnr)
  params.textDocument.version = vim.lsp.util.buf_versions[bufnr]
  params.context = { triggerKind = 2 }
  local record = { tick = tick, position = params.position, version = params.textDocument.version }
  push(M.state.requests, record)
  -- client:request flushes the pending didChange of bufnr first.
  local ok, request_id = client:request(METHOD, params, function(err, result)
    if pending[bufnr] and pending[bufnr].request_id == record.id then
      pending[bufnr] = nil
    end
    record.err = err
    local edits = result and result.edits or {}
    record.edits = #edits
    if err or not api.nvim_buf_is_valid(bufnr) then
      return
    end
    if api.nvim_buf_get_changedtick(bufnr) ~= tick or api.nvim_get_current_buf() ~= bufnr then
      record.stale = true
      return
    end
    local uri = vim.uri_from_bufnr(bufnr)
    for _, edit in ipairs(edits) do
      local doc = edit.textDocument or {}
      if doc.uri == uri and (doc.version == nil or doc.version == params.textDocument.version) then
        record.shown = edit
        show(bufnr, client, edit)
        return
      end
    end
  end, bufnr)
  if ok then
    record.id = request_id
    pending[bufnr] = { client_id = client.id, request_id = request_id }
  end
end

--- Ask `debounce_ms` after the last change.
function M.schedule(bufnr)
  require('lsp-assist.client').debounce(timers, bufnr, M.config.debounce_ms, function()
    if api.nvim_buf_is_valid(bufnr) then
      M.request(bufnr)
    end
  end)
end

--- The key: jump to the shown next edit; when the cursor is there already, apply it.
--- Returns true when there was one.
function M.jump_or_apply()
  local bufnr = api.nvim_get_current_buf()
  if not M.visible(bufnr) then
    return false
  end
  local shown = M.state.shown
  local cursor = api.nvim_win_get_cursor(0)
  if not shown.jumped or cursor[1] - 1 ~= shown.row or cursor[2] ~= shown.col then
    vim.cmd("normal! m'") -- the jump list: `` or <C-o> go back
    api.nvim_win_set_cursor(0, { shown.row + 1, shown.col })
    shown.jumped = true
    return true
  end
  return M.apply()
end

--- Apply the shown next edit now, put the cursor at its start and run its command.
function M.apply()
  local bufnr = api.nvim_get_current_buf()
  if not M.visible(bufnr) then
    return false
  end
  local shown = M.state.shown
  local client = vim.lsp.get_client_by_id(shown.client_id)
  if not client then
    M.dismiss(bufnr)
    return false
  end
  local edit = shown.edit
  M.dismiss(bufnr)
  vim.lsp.util.apply_text_edits({ { range = edit.range, newText = edit.text } }, bufnr, client.offset_encoding)
  own_tick[bufnr] = api.nvim_buf_get_changedtick(bufnr)
  pcall(api.nvim_win_set_cursor, 0, { shown.row + 1, shown.col })
  local record = { edit = edit }
  push(M.state.accepted, record)
  local command = edit.command
  if command and command.command then
    client:request('workspace/executeCommand', {
      command = command.command,
      arguments = command.arguments,
    }, function(err, result)
      record.response = { err = err, result = result }
    end, bufnr)
  end
  -- The change is the user's too: the next edit of the same rename follows.
  M.schedule(bufnr)
  return true
end

local function on_change(bufnr)
  local shown = M.state.shown
  if shown and shown.bufnr == bufnr and shown.tick ~= api.nvim_buf_get_changedtick(bufnr) then
    M.dismiss(bufnr) -- the text it was drawn on changed
  end
  if own_tick[bufnr] == api.nvim_buf_get_changedtick(bufnr) then
    return -- the plugin's own apply, which scheduled the request itself
  end
  M.schedule(bufnr)
end

local function map_keys(bufnr)
  local key, dismiss = M.config.key, M.config.dismiss
  if key then
    vim.keymap.set('n', key, function()
      if M.visible(bufnr) then
        return '<Cmd>lua require("lsp-assist.next_edit").jump_or_apply()<CR>'
      end
      return key
    end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: jump to / apply the next edit' })
  end
  if dismiss then
    vim.keymap.set('n', dismiss, function()
      if M.visible(bufnr) then
        return '<Cmd>lua require("lsp-assist.next_edit").dismiss()<CR>'
      end
      return dismiss
    end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: dismiss the next edit' })
  end
end

function M.attach(client, bufnr)
  if not M.config.enabled then
    return
  end
  local caps = client.server_capabilities or {}
  local commands = caps.executeCommandProvider and caps.executeCommandProvider.commands or {}
  if not vim.tbl_contains(commands, 'github.copilot.didAcceptNextEditSuggestionItem') then
    return -- the server's nextEdit is off
  end
  map_keys(bufnr)
  local group = api.nvim_create_augroup('lsp-assist.next-edit.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      on_change(bufnr)
    end,
  })
  api.nvim_create_autocmd('InsertLeave', {
    group = group,
    buffer = bufnr,
    callback = function()
      M.schedule(bufnr)
    end,
  })
  api.nvim_create_autocmd('BufLeave', {
    group = group,
    buffer = bufnr,
    callback = function()
      M.dismiss(bufnr)
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if ev.data and ev.data.client_id == client.id then
        M.dismiss(bufnr)
        pcall(api.nvim_del_augroup_by_id, group)
      end
    end,
  })
end

--- Called by require('lsp-assist').setup with its `next_edit` option.
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  M.set_highlight()
  local group = api.nvim_create_augroup('lsp-assist.next-edit', { clear = true })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = M.set_highlight })
  api.nvim_create_user_command('LspAssistNextEdit', function()
    M.request(api.nvim_get_current_buf())
  end, { bar = true, desc = 'lsp-assist: ask for the next edit now' })
  api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == NAME then
        M.attach(client, ev.buf)
      end
    end,
  })
end

return M
