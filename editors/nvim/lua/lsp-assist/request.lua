-- Asking the server: textDocument/inlineCompletion (or the textDocument/completion
-- fallback) at the cursor, debounced; what to do with the answer (decide.lua); the
-- lspAssist/suggestionReady notices of early answers; explicit asks (:LspAssistComplete);
-- and lspAssist/didMoveCursor where the cursor rests in Normal mode.

local M = {}

local api = vim.api
local uv = vim.uv or vim.loop
local client = require('lsp-assist.client')
local config = require('lsp-assist.config')
local decide = require('lsp-assist.decide')
local records = require('lsp-assist.records')
local render = require('lsp-assist.render')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

M.INLINE = 'textDocument/inlineCompletion'
local COMPLETION = 'textDocument/completion'
local REQUEST_CANCELLED = -32800

local timers = {} -- bufnr -> uv timer (debounce); 'cursor' -> the cursor report's

--- Set by complete() from Normal mode: ask once insert mode starts.
M.invoke_on_insert = false

--- The ghost in `bufnr` (nil: none there).
local function ghost_in(bufnr)
  local ghost = state.ghost
  return ghost and ghost.bufnr == bufnr and ghost or nil
end

--- Keep what a request made to keep the ghost got (the tests read it).
local function record_kept(log, bufnr, text, same, ms)
  local ghost = ghost_in(bufnr)
  records.push(log, { before = ghost and ghost.text or vim.NIL, after = text or vim.NIL, same = same, ms = ms })
end

--- Act on the answer (`err`, `items`) to a request sent at `sent`.
local function on_answer(bufnr, lsp_client, sent, ask, opts, err, items, ms)
  if err then
    if err.code ~= REQUEST_CANCELLED then
      client.record_error(ask.method, err)
    end
    status.changed()
    return
  end
  if not opts.refresh then
    state.status.latency_ms = ms -- a refresh's is the cache's, not what the user waited
  end
  if state.status.state == 'starting' or state.status.state == 'loading' then
    status.poll()
  end
  status.changed()
  local action, index = decide.answer({
    stale = ask.stale,
    enabled = config.enabled(bufnr),
    insert = api.nvim_get_mode().mode:sub(1, 1) == 'i',
    count = #items,
    refresh = opts.refresh,
    step = opts.step,
    keep = ask.keep,
    shown = ask.shown,
  })
  if action == 'compare' then
    local text = items[1] and render.remaining_text(bufnr, lsp_client, items[1])
    local ghost = ghost_in(bufnr)
    local same = ghost ~= nil and ghost.text == text and decide.at(ghost, render.place(bufnr))
    record_kept(opts.refresh and records.refreshes or records.typed_answers, bufnr, text, same, ms)
    action, index = decide.compared(#items, same, text ~= nil), 1
  end
  if action == 'clear' then
    render.clear(bufnr)
  elseif action == 'show' then
    render.show(bufnr, lsp_client, items, index)
  end
end

--- Ask the server for a suggestion at the cursor. `invoked`: the user asked explicitly.
--- `opts.step`: when the answer comes, show the item `step` places after the shown one
--- (cycling), wrapping around. `opts.refresh`: ask even though a suggestion shows here
--- (lspAssist/suggestionReady), and keep the shown one unless the answer differs.
function M.request(bufnr, invoked, opts)
  opts = opts or {}
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local lsp_client = client.get(bufnr)
  if not lsp_client or not config.enabled(bufnr) then
    return false
  end
  local here = render.place(bufnr)
  local out = client.pending[bufnr]
  local ghost = ghost_in(bufnr)
  local decision = decide.ask({
    invoked = invoked, step = opts.step, refresh = opts.refresh,
    place = here, pending = out and out.here, ghost = ghost,
  })
  if decision == 'skip' then
    return true
  elseif decision == 'typed' then
    ghost.typed = false -- asked once for this place
  end
  local inline = config.current.method ~= 'completion' and client.supports(lsp_client, M.INLINE)
  local method = inline and M.INLINE or COMPLETION
  local params = vim.lsp.util.make_position_params(0, lsp_client.offset_encoding)
  -- Invoked / Automatic; the completion fallback is always Invoked.
  params.context = { triggerKind = (invoked or not inline) and 1 or 2 }
  client.cancel_pending(bufnr)
  local ask = {
    method = method,
    keep = decision == 'refresh' or decision == 'typed',
    shown = ghost and ghost.index or 1,
  }
  records.count(records, 'requests')
  records.set(records, 'last_request', { method = method, params = params, bufnr = bufnr, invoked = invoked == true })
  local sent = uv.hrtime()
  local ok, request_id
  ok, request_id = client.request(lsp_client, method, params, function(err, result)
    if client.pending[bufnr] and client.pending[bufnr].request_id == request_id then
      client.pending[bufnr] = nil
    end
    local ms = (uv.hrtime() - sent) / 1e6
    local items = err and {} or decide.items(method, result)
    local current = api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr
    ask.stale = decide.stale(here, current and render.place(bufnr) or nil)
    records.count(records, 'responses')
    records.set(records, 'last_response', {
      method = method, err = err, result = result, items = items, stale = ask.stale, ms = ms,
    })
    records.push(records.history, { invoked = invoked == true, stale = ask.stale, items = #items, err = err ~= nil })
    on_answer(bufnr, lsp_client, here, ask, opts, err, items, ms)
  end, bufnr)
  if ok and request_id then
    client.pending[bufnr] = { client_id = lsp_client.id, request_id = request_id, sent = sent, here = here }
    status.changed()
  end
  return ok
end

--- Request after `debounce_ms` without typing or moving.
function M.schedule(bufnr)
  if not config.enabled(bufnr) then
    return
  end
  client.debounce(timers, bufnr, config.current.debounce_ms, function()
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr
      and api.nvim_get_mode().mode:sub(1, 1) == 'i' then
      M.request(bufnr, false)
    end
  end)
end

--- Stop the debounce timer of `bufnr`.
function M.stop(bufnr)
  if timers[bufnr] then
    timers[bufnr]:stop()
  end
end

--- Why a lspAssist/suggestionReady notice is not acted on (nil: ask again).
local function ready_ignored(params, ctx)
  if type(params) ~= 'table' or type(params.textDocument) ~= 'table' or type(params.position) ~= 'table' then
    return 'malformed'
  end
  local bufnr = api.nvim_get_current_buf()
  if vim.uri_from_bufnr(bufnr) ~= params.textDocument.uri then
    return 'not the current buffer'
  end
  local lsp_client = client.get(bufnr)
  if not lsp_client or lsp_client.id ~= ctx.client_id then
    return 'not attached'
  end
  if state.builtin then
    return 'use_builtin' -- vim.lsp.inline_completion shows only what it asked for
  end
  if not config.enabled(bufnr) then
    return 'disabled'
  end
  if api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
    return 'not in insert mode'
  end
  if client.pending[bufnr] then
    return 'a request is in flight'
  end
  local position = params.position
  local at = { row = position.line, col = render.byte_col(bufnr, position, lsp_client.offset_encoding) }
  return decide.ready_place(ghost_in(bufnr), render.place(bufnr), at)
end

--- lspAssist/suggestionReady: the whole of an early-answered suggestion is written, and
--- it is not the start that shows (longer, shorter, other, or nothing). Ask again at the
--- cursor (Automatic) when the suggestion still shows and nothing else is asked, and
--- show the answer in place of the start (none: clear it).
function M.on_suggestion_ready(err, params, ctx)
  if err then
    return
  end
  local reason = ready_ignored(params, ctx or {})
  local document = type(params) == 'table' and params.textDocument or nil
  records.push(records.ready, {
    uri = document and document.uri or vim.NIL,
    version = document and document.version or vim.NIL,
    position = type(params) == 'table' and params.position or vim.NIL,
    action = reason or 'refresh',
  })
  if not reason then
    M.request(api.nvim_get_current_buf(), false, { refresh = true })
  end
end

--- Ask for a suggestion now (the trigger key, :LspAssistComplete). From normal mode it
--- enters insert mode after the cursor (like `a`) and asks there; after <C-o> it asks
--- once back in insert mode, where the cursor is again.
function M.complete()
  local bufnr = api.nvim_get_current_buf()
  if not client.get(bufnr) then
    status.no_server('the server is not attached to this buffer')
    return false
  end
  if not config.enabled(bufnr) then
    vim.notify('lsp-assist: suggestions are off here (:LspAssistEnable)', vim.log.levels.WARN)
    return false
  end
  local mode = api.nvim_get_mode().mode
  if mode:sub(1, 1) == 'i' then
    return M.request(bufnr, true)
  end
  if mode:sub(1, 2) == 'ni' then
    -- <C-o>: this runs in normal mode with the cursor one column left at the end of a
    -- line; an answer to a request sent now would be stale once insert mode resumes.
    local tries = 0
    local function again()
      tries = tries + 1
      if api.nvim_get_mode().mode:sub(1, 1) == 'i' then
        M.request(bufnr, true)
      elseif tries < 50 then
        vim.defer_fn(again, 10)
      end
    end
    vim.schedule(again)
    return true
  end
  M.invoke_on_insert = true
  api.nvim_feedkeys('a', 'n', false)
  return true
end

local last_report = nil -- { client_id, bufnr, line, character } of the last report sent

--- Tell the server where the cursor rests (lspAssist/didMoveCursor), once per place.
local function report_cursor(bufnr)
  if bufnr ~= api.nvim_get_current_buf() or api.nvim_get_mode().mode ~= 'n' then
    return
  end
  local lsp_client = client.get(bufnr)
  if not lsp_client or state.status.state ~= 'ready' then
    return
  end
  local params = vim.lsp.util.make_position_params(0, lsp_client.offset_encoding or 'utf-16')
  local at = { lsp_client.id, bufnr, params.position.line, params.position.character }
  if last_report and vim.deep_equal(last_report, at) then
    return
  end
  last_report = at
  local ok, err = pcall(client.call, lsp_client, 'notify', 'lspAssist/didMoveCursor', {
    textDocument = { uri = params.textDocument.uri },
    position = params.position,
  })
  if not ok then
    client.record_error('lspAssist/didMoveCursor', err)
    return
  end
  records.push(records.cursor_reports, { bufnr = bufnr, line = at[3], character = at[4] })
end

--- Report the cursor once it has rested `report_cursor_ms` (a newer move restarts the wait).
function M.schedule_cursor_report(bufnr)
  local wait = config.current.report_cursor_ms
  if not wait or wait <= 0 then
    return
  end
  client.debounce(timers, 'cursor', wait, function()
    if api.nvim_buf_is_valid(bufnr) then
      report_cursor(bufnr)
    end
  end)
end

return M
