-- The insert-mode keys (those of copilot.vim): accept the suggestion, its next word or
-- line, dismiss it, ask now, cycle through the items of the answer; and typing through
-- the suggestion (a typed character that continues it keeps the rest on screen).

local M = {}

local api = vim.api
local client = require('lsp-assist.client')
local config = require('lsp-assist.config')
local decide = require('lsp-assist.decide')
local records = require('lsp-assist.records')
local render = require('lsp-assist.render')
local request = require('lsp-assist.request')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

--- changedtick right after the plugin inserted text itself (not the user's change).
M.own_tick = nil

--- Whether a suggestion shows in the current buffer.
function M.visible()
  local ghost = state.ghost
  return ghost ~= nil and ghost.bufnr == api.nvim_get_current_buf()
end

--- Length of `text` in UTF-16 code units (what Copilot's acceptedLength counts).
local function utf16_len(text)
  local ok, n = pcall(vim.str_utfindex, text, 'utf-16')
  if ok and type(n) == 'number' then
    return n
  end
  local _, units = vim.str_utfindex(text) -- 0.10 and older: (utf-32, utf-16)
  return units
end

--- Report an accepted suggestion to the server (the item's command, lspAssist.accept).
local function report_acceptance(lsp_client, bufnr, command)
  if not command or not command.command then
    return
  end
  local record = { bufnr = bufnr, command = command }
  client.request(lsp_client, 'workspace/executeCommand', {
    command = command.command,
    arguments = command.arguments,
  }, function(err, result)
    record.response = { err = err, result = result }
    if err then
      client.record_error('workspace/executeCommand', err)
    end
  end, bufnr)
  return record
end

--- Insert the ghost text: all of it (`kind` nil or 'all'), its next 'word' or 'line'.
--- The rest stays on screen; the server hears of the acceptance once all of it is in.
--- Returns true when there was a suggestion.
function M.accept(kind)
  local ghost = state.ghost
  if not ghost or ghost.bufnr ~= api.nvim_get_current_buf() then
    return false
  end
  local bufnr = ghost.bufnr
  render.clear()
  if api.nvim_buf_get_changedtick(bufnr) ~= ghost.tick then
    return false
  end
  local part, rest = decide.accept_part(ghost.text, kind)
  local lines = vim.split(part, '\n', { plain = true })
  api.nvim_buf_set_text(bufnr, ghost.row, ghost.col, ghost.row, ghost.col, lines)
  local end_row = ghost.row + #lines - 1
  local end_col = (#lines == 1 and ghost.col or 0) + #lines[#lines]
  pcall(api.nvim_win_set_cursor, 0, { end_row + 1, end_col })
  M.own_tick = api.nvim_buf_get_changedtick(bufnr)
  local item = ghost.item
  item.accepted_text = (item.accepted_text or '') .. part
  -- Cycling from here asks the server again: the other items started elsewhere.
  state.items = {}
  if rest ~= '' then
    records.push(records.partial, { kind = kind, inserted = part })
    -- From the start of the item's text to the end of what is in (Copilot's measure).
    client.tell(ghost.client_id, 'textDocument/didPartiallyAcceptCompletion', item, {
      item = client.wire_item(item),
      acceptedLength = utf16_len(item.text) - utf16_len(rest),
    })
    render.draw(bufnr, ghost.client_id, item, rest, 1, 1)
    return true
  end
  local lsp_client = vim.lsp.get_client_by_id(ghost.client_id)
  local record = lsp_client and report_acceptance(lsp_client, bufnr, item.command)
    or { bufnr = bufnr, command = item.command }
  record.inserted, record.kind = item.accepted_text, kind or 'all'
  records.push(records.accepted, record)
  return true
end

--- Remove the suggestion (and cancel the request on its way). True when there was one.
function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  local had = M.visible()
  if had then
    local ghost = state.ghost
    client.tell(ghost.client_id, 'lspAssist/didDismissCompletion', ghost.item, { item = { command = ghost.item.command } })
  end
  render.clear(bufnr)
  client.cancel_pending(bufnr)
  state.items = {}
  status.changed()
  return had
end

--- Show the next (`step` 1) or previous (-1) item of the answer. With one item shown,
--- ask again explicitly (a server may offer more then); with none, ask now.
function M.cycle(step)
  local bufnr = api.nvim_get_current_buf()
  local ghost = state.ghost
  if not ghost or ghost.bufnr ~= bufnr then
    return request.request(bufnr, true)
  end
  local items = state.items
  if #items > 1 then
    local lsp_client = vim.lsp.get_client_by_id(ghost.client_id)
    for _, index in ipairs(decide.cycle_order(ghost.index, step, #items)) do
      if lsp_client and render.show(bufnr, lsp_client, items, index) then
        return true
      end
    end
    return false
  end
  -- Ask once per position and text: the answer is the same until either changes.
  local key = table.concat({ bufnr, api.nvim_buf_get_changedtick(bufnr), ghost.row, ghost.col }, ':')
  if state.asked_alternatives == key then
    return false
  end
  state.asked_alternatives = key
  return request.request(bufnr, true, { step = step })
end

--- InsertCharPre with `char` about to go in at the cursor: when it is the ghost's next
--- character, show the rest in place and return true. TextChangedI then records the new
--- changedtick, and the request made after it keeps the ghost unless the server's
--- answer differs.
function M.type_through(bufnr, char)
  local ghost = state.ghost
  local rest = ghost and ghost.bufnr == bufnr and decide.type_through(ghost, render.place(bufnr), char)
  if not rest or not render.type_through(ghost, char, rest) then
    return false
  end
  records.count(records, 'typed_through')
  return true
end

--- After Enter: keep a ghost that starts with the line break and the indentation the
--- editor gave (the server's next kept line) on screen at the new line. True when it did.
function M.newline_through(bufnr)
  local ghost = state.ghost
  if not ghost or ghost.bufnr ~= bufnr or ghost.text:sub(1, 1) ~= '\n' then
    return false
  end
  local place = render.place(bufnr)
  local lines = api.nvim_buf_get_lines(bufnr, place.row - 1, place.row + 1, false)
  if #lines < 2 then
    return false
  end
  local rest = decide.newline_through(ghost, place, lines[2]:sub(1, place.col), #lines[1])
  if not rest or not render.move_down(ghost, place, rest) then
    return false
  end
  records.count(records, 'typed_through')
  return true
end

local function keys_config()
  local options = config.current
  local keys = vim.tbl_extend('force', {}, options.keys or {})
  if options.accept_key ~= nil then
    keys.accept = options.accept_key
  end
  return keys
end

--- An insert-mode mapping that runs `action` (a function of the module `owner`, which
--- the public face re-exports) when a suggestion shows (or `always`), and is the plain
--- key otherwise.
local function map(bufnr, key, owner, action, desc, always)
  if not key then
    return
  end
  vim.keymap.set('i', key, function()
    if always or M.visible() then
      return '<Cmd>lua require("lsp-assist.' .. owner .. '").' .. action .. '<CR>'
    end
    return key
  end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: ' .. desc })
end

--- The plugin's insert-mode keys in `bufnr`.
function M.map(bufnr)
  local keys = keys_config()
  map(bufnr, keys.accept, 'keys', 'accept()', 'accept the suggestion')
  map(bufnr, keys.accept_word, 'keys', 'accept("word")', 'accept the next word of the suggestion')
  map(bufnr, keys.accept_line, 'keys', 'accept("line")', 'accept the next line of the suggestion')
  map(bufnr, keys.dismiss, 'keys', 'dismiss()', 'dismiss the suggestion')
  map(bufnr, keys.trigger, 'request', 'complete()', 'ask for a suggestion now', true)
  map(bufnr, keys.next, 'keys', 'cycle(1)', 'next suggestion', true)
  map(bufnr, keys.prev, 'keys', 'cycle(-1)', 'previous suggestion', true)
end

--- With use_builtin: only the accept key, for vim.lsp.inline_completion.
function M.map_builtin_accept(bufnr)
  local key = keys_config().accept
  if not key then
    return
  end
  vim.keymap.set('i', key, function()
    if vim.lsp.inline_completion.get({ bufnr = bufnr }) then
      return ''
    end
    return key
  end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: accept suggestion' })
end

return M
