-- lsp-assist for Neovim: starts `lsp-assist serve` with the built-in LSP client and shows
-- its suggestions as ghost text.
--
--   require('lsp-assist').setup({
--     cmd = { 'lsp-assist', 'serve' },
--     settings = { modelPath = '/models/qwen2.5-coder-1.5b-q4_k_m.gguf', contextBudget = 1024 },
--   })
--
-- Neovim 0.12 has vim.lsp.inline_completion: the plugin turns it on and maps <Tab> to
-- vim.lsp.inline_completion.get(). On 0.10/0.11 the plugin does the same job itself:
-- it sends textDocument/inlineCompletion after a short pause in typing (InsertCharPre /
-- TextChangedI, debounced), draws the first item as virtual text (an extmark), and <Tab>
-- inserts it and reports the acceptance (workspace/executeCommand lspAssist.accept). When
-- the server does not offer inline completion it falls back to textDocument/completion
-- and shows the item's textEdit the same way.
--
-- require('lsp-assist').state holds what the plugin saw (clients, last request and
-- response, the ghost text, acceptances): the headless tests read it.

local M = {}

local api = vim.api
local uv = vim.uv or vim.loop

local NAME = 'lsp_assist'
local INLINE = 'textDocument/inlineCompletion'
local COMPLETION = 'textDocument/completion'
local ns = api.nvim_create_namespace('lsp-assist.ghost')

---@class lsp_assist.Config
M.defaults = {
  --- Command that starts the server on stdio.
  cmd = { 'lsp-assist', 'serve' },
  --- Server settings, flat camelCase keys (docs/configuration.md), sent as
  --- initializationOptions and as workspace/didChangeConfiguration.
  settings = {},
  filetypes = {
    'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
    'go', 'rust', 'java', 'c', 'cpp',
  },
  root_markers = { '.git', 'pyproject.toml', 'setup.py', 'package.json', 'go.mod', 'Cargo.toml', 'pom.xml', 'Makefile' },
  --- Pause after the last keystroke before asking (the server debounces too).
  debounce_ms = 75,
  --- Key that accepts the ghost text in insert mode (false: no mapping; call accept()).
  accept_key = '<Tab>',
  --- Use Neovim's own vim.lsp.inline_completion when it exists (0.12+).
  use_builtin = true,
  --- 'auto': textDocument/inlineCompletion when the server offers it, else the
  --- textDocument/completion fallback; 'completion': always the fallback.
  method = 'auto',
  --- Extra fields merged into the vim.lsp.config / vim.lsp.start table.
  lsp = {},
}

M.config = vim.deepcopy(M.defaults)

--- What the plugin saw; read by tests and :LspAssistState.
M.state = {
  setup = false,
  builtin = false,
  clients = {}, -- client_id -> { name, initialized, inline, completion, commands }
  attached = {}, -- bufnr -> client_id
  requests = 0,
  responses = 0,
  last_request = nil, -- { method, params, bufnr }
  last_response = nil, -- { method, err, result, items, stale }
  ghost = nil, -- { bufnr, row, col, text, item, extmark }
  accepted = {}, -- { item, inserted, command, response = { err, result } }
  errors = {},
}

local function has(version)
  return vim.fn.has('nvim-' .. version) == 1
end

local function record_error(where, err)
  table.insert(M.state.errors, { where = where, err = err })
end

--- Call a client method with the 0.11+ colon syntax, or the 0.10 dot syntax.
local function client_request(client, method, params, handler, bufnr)
  if has('0.11') then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_supports(client, method)
  if has('0.11') then
    return client:supports_method(method)
  end
  return client.supports_method(method)
end

local function cancel_request(client, id)
  if has('0.11') then
    client:cancel_request(id)
  else
    client.cancel_request(id)
  end
end

local function get_client(bufnr)
  local id = M.state.attached[bufnr]
  if not id then
    return nil
  end
  return vim.lsp.get_client_by_id(id)
end

-- Ghost text ---------------------------------------------------------------------------

function M.clear(bufnr)
  local ghost = M.state.ghost
  if ghost and (bufnr == nil or ghost.bufnr == bufnr) then
    pcall(api.nvim_buf_del_extmark, ghost.bufnr, ns, ghost.extmark)
    M.state.ghost = nil
  end
end

--- Byte column of an LSP position on its line.
local function byte_col(bufnr, position, encoding)
  local line = api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  local util = vim.lsp.util
  if util._get_line_byte_from_position then
    local ok, col = pcall(util._get_line_byte_from_position, bufnr, position, encoding)
    if ok then
      return col
    end
  end
  if encoding == 'utf-8' then
    return math.min(position.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding or 'utf-16', position.character, false)
  if ok and type(col) == 'number' then
    return col
  end
  return math.min(position.character, #line)
end

local function snippet_text(value)
  -- Keep placeholder text, drop tab stops: ${1:foo} -> foo, $1 / ${0} -> ''.
  local text = value:gsub('%${%d+:([^}]*)}', '%1'):gsub('%${%d+}', ''):gsub('%$%d+', '')
  return text
end

--- Normalize inline items or completion items into { text, range, command }.
local function normalize(method, result)
  local items = {}
  if not result then
    return items
  end
  local raw_items = result.items or result
  if type(raw_items) ~= 'table' then
    return items
  end
  for _, raw in ipairs(raw_items) do
    if method == INLINE then
      local text = raw.insertText
      if type(text) == 'table' then
        text = snippet_text(text.value or '')
      end
      if type(text) == 'string' then
        table.insert(items, { text = text, range = raw.range, command = raw.command })
      end
    else
      local edit = raw.textEdit
      local text, range
      if edit then
        text = edit.newText
        range = edit.range or edit.insert
      else
        text = raw.insertText or raw.label
      end
      if raw.insertTextFormat == 2 and text then
        text = snippet_text(text)
      end
      if type(text) == 'string' and text ~= '' then
        table.insert(items, { text = text, range = range, command = raw.command, label = raw.label })
      end
    end
  end
  return items
end

--- Draw `item` as ghost text at the cursor of the current window.
local function show(bufnr, client, item)
  M.clear()
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local start_row, start_col = row, col
  if item.range then
    start_row = item.range.start.line
    start_col = byte_col(bufnr, item.range.start, client.offset_encoding)
  end
  local text = item.text
  if start_row == row and start_col < col then
    -- The item replaces text typed since its range start: show only the rest.
    local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
    local typed = line:sub(start_col + 1, col)
    if text:sub(1, #typed) ~= typed then
      return false
    end
    text = text:sub(#typed + 1)
  elseif start_row ~= row then
    return false
  end
  if text == '' then
    return false
  end
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'LspAssistGhost' } })
  end
  local opts = {
    virt_text = { { lines[1], 'LspAssistGhost' } },
    virt_text_pos = has('0.10') and 'inline' or 'overlay',
    hl_mode = 'combine',
  }
  if #virt_lines > 0 then
    opts.virt_lines = virt_lines
  end
  local ok, extmark = pcall(api.nvim_buf_set_extmark, bufnr, ns, row, col, opts)
  if not ok then
    record_error('extmark', extmark)
    return false
  end
  M.state.ghost = {
    bufnr = bufnr,
    row = row,
    col = col,
    text = text,
    item = item,
    client_id = client.id,
    extmark = extmark,
    tick = api.nvim_buf_get_changedtick(bufnr),
  }
  return true
end

-- Requests -----------------------------------------------------------------------------

local pending = {} -- bufnr -> { client_id, request_id }
local timers = {} -- bufnr -> uv timer

--- Ask the server for a suggestion at the cursor. `invoked`: the user asked explicitly.
function M.request(bufnr, invoked)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local client = get_client(bufnr)
  if not client then
    return false
  end
  local inline = M.config.method ~= 'completion' and client_supports(client, INLINE)
  local method = inline and INLINE or COMPLETION
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  if inline then
    params.context = { triggerKind = invoked and 1 or 2 } -- Invoked / Automatic
  else
    params.context = { triggerKind = 1 }
  end
  local previous = pending[bufnr]
  if previous then
    local prev_client = vim.lsp.get_client_by_id(previous.client_id)
    if prev_client then
      cancel_request(prev_client, previous.request_id)
    end
    pending[bufnr] = nil
  end
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local cursor = api.nvim_win_get_cursor(0)
  M.state.requests = M.state.requests + 1
  M.state.last_request = { method = method, params = params, bufnr = bufnr }
  local ok, request_id
  ok, request_id = client_request(client, method, params, function(err, result)
    if pending[bufnr] and pending[bufnr].request_id == request_id then
      pending[bufnr] = nil
    end
    local items = err and {} or normalize(method, result)
    local now = api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr
    local stale = not now
      or api.nvim_buf_get_changedtick(bufnr) ~= tick
      or not vim.deep_equal(api.nvim_win_get_cursor(0), cursor)
    M.state.responses = M.state.responses + 1
    M.state.last_response = { method = method, err = err, result = result, items = items, stale = stale }
    if err then
      record_error(method, err)
      return
    end
    if stale or #items == 0 then
      return
    end
    local mode = api.nvim_get_mode().mode
    if mode:sub(1, 1) ~= 'i' and not M._show_outside_insert then
      return
    end
    show(bufnr, client, items[1])
  end, bufnr)
  if ok and request_id then
    pending[bufnr] = { client_id = client.id, request_id = request_id }
  end
  return ok
end

--- Request after `debounce_ms` without typing.
function M.schedule(bufnr)
  local timer = timers[bufnr]
  if not timer then
    timer = uv.new_timer()
    timers[bufnr] = timer
  end
  timer:stop()
  timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
      local mode = api.nvim_get_mode().mode
      if mode:sub(1, 1) == 'i' then
        M.request(bufnr, false)
      end
    end
  end))
end

--- Report an accepted suggestion to the server (the item's command, lspAssist.accept).
local function report_acceptance(client, record)
  local command = record.command
  if not command or not command.command then
    return
  end
  client_request(client, 'workspace/executeCommand', {
    command = command.command,
    arguments = command.arguments,
  }, function(err, result)
    record.response = { err = err, result = result }
    if err then
      record_error('workspace/executeCommand', err)
    end
  end, record.bufnr)
end

--- Insert the ghost text. Returns true when there was one.
function M.accept()
  local ghost = M.state.ghost
  if not ghost or ghost.bufnr ~= api.nvim_get_current_buf() then
    return false
  end
  M.clear()
  local bufnr = ghost.bufnr
  if api.nvim_buf_get_changedtick(bufnr) ~= ghost.tick then
    return false
  end
  local client = vim.lsp.get_client_by_id(ghost.client_id)
  local lines = vim.split(ghost.text, '\n', { plain = true })
  api.nvim_buf_set_text(bufnr, ghost.row, ghost.col, ghost.row, ghost.col, lines)
  local end_row = ghost.row + #lines - 1
  local end_col = (#lines == 1 and ghost.col or 0) + #lines[#lines]
  pcall(api.nvim_win_set_cursor, 0, { end_row + 1, end_col })
  local record = { bufnr = bufnr, inserted = ghost.text, command = ghost.item.command }
  table.insert(M.state.accepted, record)
  if client then
    report_acceptance(client, record)
  end
  return true
end

function M.visible()
  local ghost = M.state.ghost
  return ghost ~= nil and ghost.bufnr == api.nvim_get_current_buf()
end

-- Attaching ----------------------------------------------------------------------------

local function map_accept(bufnr, builtin)
  local key = M.config.accept_key
  if not key then
    return
  end
  vim.keymap.set('i', key, function()
    if builtin then
      if vim.lsp.inline_completion.get({ bufnr = bufnr }) then
        return ''
      end
      return key
    end
    if M.visible() then
      return '<Cmd>lua require("lsp-assist").accept()<CR>'
    end
    return key
  end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: accept suggestion' })
end

local function on_attach(client, bufnr)
  M.state.attached[bufnr] = client.id
  local caps = client.server_capabilities or {}
  M.state.clients[client.id] = {
    name = client.name,
    initialized = client.initialized ~= false,
    inline = caps.inlineCompletionProvider ~= nil and caps.inlineCompletionProvider ~= false,
    completion = caps.completionProvider ~= nil,
    commands = caps.executeCommandProvider and caps.executeCommandProvider.commands or {},
  }
  local builtin = M.config.use_builtin and vim.lsp.inline_completion ~= nil
    and M.config.method ~= 'completion' and M.state.clients[client.id].inline
  M.state.builtin = builtin
  if builtin then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    map_accept(bufnr, true)
    return
  end
  local group = api.nvim_create_augroup('lsp-assist.buf.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'InsertCharPre', 'TextChangedI', 'TextChangedP' }, {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if ev.event == 'InsertCharPre' then
        M.clear(bufnr) -- the ghost no longer matches the text
      else
        M.schedule(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
    end,
  })
  api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = bufnr,
    callback = function()
      local ghost = M.state.ghost
      if ghost and ghost.bufnr == bufnr then
        local cursor = api.nvim_win_get_cursor(0)
        if cursor[1] - 1 ~= ghost.row or cursor[2] ~= ghost.col then
          M.clear(bufnr)
        end
      end
    end,
  })
  map_accept(bufnr, false)
end

-- Commands -----------------------------------------------------------------------------

local function execute(command, arguments, callback)
  local bufnr = api.nvim_get_current_buf()
  local client = get_client(bufnr)
  if not client then
    for _, c in ipairs(vim.lsp.get_clients({ name = NAME })) do
      client = c
      break
    end
  end
  if not client then
    vim.notify('lsp-assist: the server is not running', vim.log.levels.WARN)
    return false
  end
  client_request(client, 'workspace/executeCommand', { command = command, arguments = arguments },
    function(err, result)
      callback(err, result)
    end, bufnr)
  return true
end

local function show_scratch(title, text, filetype)
  vim.cmd('botright new')
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  pcall(api.nvim_buf_set_name, buf, title)
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true }))
  vim.bo[buf].filetype = filetype
  vim.bo[buf].modifiable = false
end

local function render(result)
  if type(result) == 'string' then
    return result, 'markdown'
  end
  if type(result) == 'table' and type(result.text) == 'string' then
    return result.text, 'markdown'
  end
  return vim.inspect(result), 'lua'
end

--- Show the context the server would send to the model at the cursor.
function M.explain(callback)
  local bufnr = api.nvim_get_current_buf()
  local client = get_client(bufnr)
  local encoding = client and client.offset_encoding or 'utf-16'
  local params = vim.lsp.util.make_position_params(0, encoding)
  return execute('lspAssist.explainContext',
    { params.textDocument.uri, params.position.line, params.position.character },
    callback or function(err, result)
      if err then
        vim.notify('lsp-assist: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        return
      end
      local text, ft = render(result)
      show_scratch('lsp-assist://explain', text, ft)
    end)
end

--- Show the server's status (model, cache, latency figures).
function M.status(callback)
  return execute('lspAssist.status', {}, callback or function(err, result)
    if err then
      vim.notify('lsp-assist: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    show_scratch('lsp-assist://status', vim.inspect(result), 'lua')
  end)
end

--- Change server settings at run time (workspace/didChangeConfiguration).
function M.set_settings(values)
  M.config.settings = vim.tbl_extend('force', M.config.settings, values)
  for _, client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    local settings = next(M.config.settings) and M.config.settings or vim.empty_dict()
    client.settings = { lspAssist = settings }
    local params = { settings = { lspAssist = settings } }
    if has('0.11') then
      client:notify('workspace/didChangeConfiguration', params)
    else
      client.notify('workspace/didChangeConfiguration', params)
    end
  end
end

-- Setup --------------------------------------------------------------------------------

--- Start the server for the configured filetypes and show its suggestions.
---@param opts? table see M.defaults
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.settings then
    M.config.settings = opts.settings -- a list-valued setting must not be merged
  end
  local config = M.config
  api.nvim_set_hl(0, 'LspAssistGhost', { link = 'Comment', default = true })

  local settings = vim.deepcopy(config.settings)
  -- Empty tables are sent as JSON objects, not arrays.
  local init_options = next(settings) and settings or vim.empty_dict()
  local lsp_config = vim.tbl_deep_extend('force', {
    cmd = config.cmd,
    filetypes = config.filetypes,
    root_markers = config.root_markers,
    init_options = init_options,
    settings = { lspAssist = init_options },
  }, config.lsp or {})

  api.nvim_create_autocmd('LspAttach', {
    group = api.nvim_create_augroup('lsp-assist.attach', { clear = true }),
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == NAME then
        on_attach(client, ev.buf)
      end
    end,
  })

  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(NAME, lsp_config)
    vim.lsp.enable(NAME)
  else
    api.nvim_create_autocmd('FileType', {
      group = api.nvim_create_augroup('lsp-assist.start', { clear = true }),
      pattern = config.filetypes,
      callback = function(ev)
        local root = vim.fs.root and vim.fs.root(ev.buf, config.root_markers) or vim.fn.getcwd()
        local start = vim.tbl_extend('force', lsp_config, { name = NAME, root_dir = root or vim.fn.getcwd() })
        start.filetypes, start.root_markers = nil, nil
        vim.lsp.start(start, { bufnr = ev.buf })
      end,
    })
  end

  api.nvim_create_user_command('LspAssistExplain', function()
    M.explain()
  end, { desc = 'lsp-assist: show the context built at the cursor' })
  api.nvim_create_user_command('LspAssistStatus', function()
    M.status()
  end, { desc = 'lsp-assist: show the server status' })
  api.nvim_create_user_command('LspAssistComplete', function()
    M.request(0, true)
  end, { desc = 'lsp-assist: ask for a suggestion now' })
  M.state.setup = true
end

return M
