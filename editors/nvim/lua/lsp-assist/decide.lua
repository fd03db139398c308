-- The request/show decisions of the Neovim plugin, pure: plain tables in, plain values
-- out, no editor calls (tests/editors/test_nvim_decide.py runs them in `nvim -l`).
--
-- A place is { bufnr, tick (changedtick), row (0-based), col (byte) }: where the cursor
-- is in which text. The ghost (the suggestion on screen) is a place too, with its
-- `text` (what is still to insert) and `typed` (the user typed into it since the last
-- request). The callers read the editor into these tables and act on the answers.

local M = {}

local INLINE = 'textDocument/inlineCompletion'

--- Whether `a` and `b` are the same text and cursor (both non-nil).
function M.same_place(a, b)
  return a ~= nil and b ~= nil and a.bufnr == b.bufnr and a.tick == b.tick
    and a.row == b.row and a.col == b.col
end

--- Whether the ghost shows at the cursor position `place` (its text may have changed
--- under it: typed-through characters).
function M.at(ghost, place)
  return ghost ~= nil and ghost.bufnr == place.bufnr and ghost.row == place.row and ghost.col == place.col
end

--- Whether to send a request at `a.place`: 'skip' (nothing new to ask: a request for
--- this text and place is out, `a.pending`, or the ghost shows here), 'ask', 'refresh'
--- (ask, and keep the ghost unless the answer differs: lspAssist/suggestionReady) or
--- 'typed' (the user typed into the ghost: ask once, keep it unless the answer differs;
--- the caller marks the ghost asked). `a.invoked` (the user asked) and `a.step`
--- (cycling) always ask.
function M.ask(a)
  if a.refresh then
    return 'refresh'
  end
  if a.invoked or a.step then
    return 'ask'
  end
  if M.same_place(a.pending, a.place) then
    return 'skip'
  end
  if M.same_place(a.ghost, a.place) then
    return a.ghost.typed and 'typed' or 'skip'
  end
  return 'ask'
end

--- Whether an answer to a request sent at place `sent` is stale at `now` (nil: its
--- buffer is gone or not the current one).
function M.stale(sent, now)
  return not M.same_place(sent, now)
end

--- Item `step` places after item `shown` of `count`, wrapping around.
function M.step_index(shown, step, count)
  return (shown - 1 + step) % count + 1
end

--- The items to try, in order, when cycling by `step` from item `index` of `count`.
function M.cycle_order(index, step, count)
  local order = {}
  for offset = 1, count - 1 do
    table.insert(order, M.step_index(index, step * offset, count))
  end
  return order
end

--- What to do with an answer of `a.count` items: 'drop' (leave the screen as it is),
--- 'clear', 'show' (item `index`, the second value) or 'compare' (the request was to
--- keep the ghost: compare the answer with it, then M.compared). `a`: stale, enabled
--- (suggestions on in the buffer), insert (in insert mode), refresh, step, keep (the
--- ask was 'refresh' or 'typed'), shown (the index showing when asked).
function M.answer(a)
  if a.stale or not a.enabled or not a.insert then
    return 'drop'
  end
  if a.count == 0 and not a.refresh then
    return a.step and 'clear' or 'drop' -- asked for alternatives, got none: keep nothing stale
  end
  if a.keep then
    return 'compare'
  end
  return 'show', a.step and M.step_index(a.shown, a.step, a.count) or 1
end

--- After 'compare': 'clear' (the answer is nothing here: the start that shows goes too),
--- 'keep' (the ghost is the answer, or the answer does not fit: no redraw, no flicker)
--- or 'show' (the answer's first item). `same`: its rest at the cursor is the ghost's
--- text; `fits`: it has a rest at the cursor.
function M.compared(count, same, fits)
  if count == 0 then
    return 'clear'
  end
  if same or not fits then
    return 'keep'
  end
  return 'show'
end

--- The rest of the ghost after typing `char` at `place` (nil: the character does not
--- continue it, or it was its last).
function M.type_through(ghost, place, char)
  if ghost == nil or char == nil or char == '' or not M.same_place(ghost, place) then
    return nil
  end
  if ghost.text:sub(1, #char) ~= char then
    return nil
  end
  local rest = ghost.text:sub(#char + 1)
  if rest == '' then
    return nil -- all of it typed: nothing left to show
  end
  return rest
end

--- The rest of a ghost that starts with a line break (the next line, kept by the server)
--- once Enter moved the cursor to `place`, the start of the next line with `before` (the
--- editor's indentation) before it; `ended` is the length of the line Enter left. nil:
--- the ghost does not go on that way (another line, text after the old cursor, another
--- indentation than the ghost's: the server is asked instead).
function M.newline_through(ghost, place, before, ended)
  if ghost == nil or place == nil or ghost.bufnr ~= place.bufnr then
    return nil
  end
  if place.row ~= ghost.row + 1 or place.col ~= #before or ended ~= ghost.col then
    return nil
  end
  local typed = '\n' .. before
  if ghost.text:sub(1, #typed) ~= typed then
    return nil
  end
  local rest = ghost.text:sub(#typed + 1)
  if rest == '' or rest:sub(1, 1) == '\n' then
    return nil
  end
  return rest
end

--- Why a lspAssist/suggestionReady notice for `position` ({ row, col } in bytes) is
--- not acted on as far as the ghost goes (nil: ask again). It applies while its ghost
--- shows at `place` with the text as drawn (or as typed into), asked there or before
--- the cursor on the way typed since.
function M.ready_place(ghost, place, position)
  if not M.same_place(ghost, place) then
    return 'no suggestion shown'
  end
  if position.row > ghost.row or (position.row == ghost.row and position.col > ghost.col) then
    return 'another place'
  end
  return nil
end

--- The part of an item's `text` still to insert at the cursor (`row`, `col`; `line`: the
--- cursor's line), the item's range starting at `start` ({ row, col } in bytes, nil:
--- no range). nil: it does not fit here (another line, after the cursor, or its start
--- is not what was typed since).
function M.remaining(text, start, row, col, line)
  if start then
    if start.row ~= row or start.col > col then
      return nil
    end
    if start.col < col then
      -- The item replaces text typed since its range start: show only the rest.
      local typed = line:sub(start.col + 1, col)
      if text:sub(1, #typed) ~= typed then
        return nil
      end
      text = text:sub(#typed + 1)
    end
  end
  if text == '' then
    return nil
  end
  return text
end

--- The next word of `text`: what is before it on the line, then the word (as
--- copilot.vim); at a line break, the break and the next line's indentation.
function M.next_word(text)
  local word = text:match('^[^%w_\n]*[%w_]*')
  if word == '' then
    word = text:match('^\n[ \t]*') or text:sub(1, 1)
  end
  return word
end

--- The rest of the ghost's current line; at a line break, the break and the next line.
function M.next_line(text)
  local line = text:match('^[^\n]+')
  if not line then
    line = text:match('^\n[^\n]*') or text
  end
  return line
end

--- What accepting `kind` ('word', 'line', nil or 'all': everything) of `text` inserts,
--- and what stays on screen.
function M.accept_part(text, kind)
  local part = text
  if kind == 'word' then
    part = M.next_word(text)
  elseif kind == 'line' then
    part = M.next_line(text)
  end
  return part, text:sub(#part + 1)
end

local function snippet_text(value)
  -- Keep placeholder text, drop tab stops: ${1:foo} -> foo, $1 / ${0} -> ''.
  local text = value:gsub('%${%d+:([^}]*)}', '%1'):gsub('%${%d+}', ''):gsub('%$%d+', '')
  return text
end

--- The items of an answer to `method` (inline items or completion items) as
--- { text, range, command, label }.
function M.items(method, result)
  local items = {}
  local raw_items = type(result) == 'table' and (result.items or result) or nil
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
      if raw.insertTextFormat == 2 and type(text) == 'string' then
        text = snippet_text(text)
      end
      if type(text) == 'string' and text ~= '' then
        table.insert(items, { text = text, range = range, command = raw.command, label = raw.label })
      end
    end
  end
  return items
end

return M
