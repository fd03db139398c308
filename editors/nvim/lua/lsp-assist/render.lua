-- The ghost text: a suggestion drawn as virtual text at the cursor (an extmark: the
-- first line inline, further lines as virtual lines) in the highlight LspAssistGhost.
-- state.ghost is what shows: { bufnr, row, col, text, item, index, count, client_id,
-- extmark, tick, typed }.

local M = {}

local api = vim.api
local client = require('lsp-assist.client')
local decide = require('lsp-assist.decide')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

M.ns = api.nvim_create_namespace('lsp-assist.ghost')

--- Apply the ghost-text highlight: a grey that shows in 256-colour terminals too
--- (copilot.vim's CopilotSuggestion colours); `default`, so a colour scheme or the
--- user's own :highlight wins.
function M.set_highlight()
  api.nvim_set_hl(0, 'LspAssistGhost', { fg = '#808080', ctermfg = 244, default = true })
end

--- The cursor of the current window in `bufnr`, as a place (decide.lua).
function M.place(bufnr)
  local cursor = api.nvim_win_get_cursor(0)
  return { bufnr = bufnr, tick = api.nvim_buf_get_changedtick(bufnr), row = cursor[1] - 1, col = cursor[2] }
end

--- Remove the ghost (in `bufnr`, or wherever it shows).
function M.clear(bufnr)
  local ghost = state.ghost
  if ghost and (bufnr == nil or ghost.bufnr == bufnr) then
    pcall(api.nvim_buf_del_extmark, ghost.bufnr, M.ns, ghost.extmark)
    state.ghost = nil
    status.changed()
  end
end

--- Byte column of an LSP position on its line.
function M.byte_col(bufnr, position, encoding)
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

--- The part of `item` still to insert at the cursor (nil: it does not fit here).
function M.remaining_text(bufnr, lsp_client, item)
  local here = M.place(bufnr)
  local start
  if item.range then
    local position = item.range.start
    start = { row = position.line, col = M.byte_col(bufnr, position, lsp_client.offset_encoding) }
  end
  local line = api.nvim_buf_get_lines(bufnr, here.row, here.row + 1, false)[1] or ''
  return decide.remaining(item.text, start, here.row, here.col, line)
end

--- The extmark options that show `text` as ghost text.
local function ghost_opts(text)
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'LspAssistGhost' } })
  end
  local opts = {
    virt_text = { { lines[1], 'LspAssistGhost' } },
    virt_text_pos = client.has('0.10') and 'inline' or 'overlay',
    hl_mode = 'replace',
  }
  if #virt_lines > 0 then
    opts.virt_lines = virt_lines
  end
  return opts
end

local shown_item -- the item last reported as shown (a redraw of its rest is not a show)

--- Draw `text` (of `item`, number `index` of `count`) as ghost text at the cursor.
function M.draw(bufnr, client_id, item, text, index, count)
  M.clear()
  local here = M.place(bufnr)
  local ok, extmark = pcall(api.nvim_buf_set_extmark, bufnr, M.ns, here.row, here.col, ghost_opts(text))
  if not ok then
    client.record_error('extmark', extmark)
    return false
  end
  state.ghost = {
    bufnr = bufnr,
    row = here.row,
    col = here.col,
    text = text,
    item = item,
    index = index,
    count = count,
    client_id = client_id,
    extmark = extmark,
    tick = here.tick,
  }
  if shown_item ~= item then
    shown_item = item
    client.tell(client_id, 'textDocument/didShowCompletion', item, { item = client.wire_item(item) })
  end
  status.changed()
  return true
end

--- Show item `index` of `items` at the cursor; false when it does not fit there.
function M.show(bufnr, lsp_client, items, index)
  local item = items[index]
  local text = item and M.remaining_text(bufnr, lsp_client, item)
  if not text then
    return false
  end
  state.items = items
  return M.draw(bufnr, lsp_client.id, item, text, index, #items)
end

--- Redraw the ghost's extmark with `text` at (`row`, `col`): the same extmark, no clear,
--- no flicker. False (and the error recorded) when it could not be updated.
local function redraw(ghost, row, col, text)
  local opts = ghost_opts(text)
  opts.id = ghost.extmark
  local ok, err = pcall(api.nvim_buf_set_extmark, ghost.bufnr, M.ns, row, col, opts)
  if not ok then
    client.record_error('extmark', err)
  end
  return ok
end

--- Show `rest` in place of the ghost's text after `typed` went in before it: the same
--- extmark, the same redraw (no clear, no flicker); its right gravity carries it past
--- the typed character. False when the extmark could not be updated.
function M.type_through(ghost, typed, rest)
  if not redraw(ghost, ghost.row, ghost.col, rest) then
    return false
  end
  ghost.text = rest
  ghost.col = ghost.col + #typed
  ghost.tick = nil -- set by TextChangedI, once the character is in
  ghost.typed = true
  return true
end

--- Draw the rest of `ghost` at the start of the next line after Enter (`place`, the cursor
--- there): the ghost moves with the cursor, still typed into.
function M.move_down(ghost, place, rest)
  if not redraw(ghost, place.row, place.col, rest) then
    return false
  end
  ghost.text, ghost.row, ghost.col = rest, place.row, place.col
  ghost.tick = place.tick
  ghost.typed = true
  return true
end

return M
