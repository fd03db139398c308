-- Records that only the tests read, kept behind one switch: setup({ debug_records = true }).
-- Off (the default) they stay empty and nothing is kept. This module owns the plugin's
-- (the fields below, read as require('lsp-assist.records').requests, ...); next_edit.lua
-- keeps its own in require('lsp-assist.next_edit').state with the same functions.

local M = {}

--- Set by setup() from its `debug_records` option.
M.on = false

--- The last entries a list keeps.
M.LIMIT = 50

-- The plugin's records --------------------------------------------------------------------

--- Requests sent and answers received (counts), the last of each.
M.requests = 0
M.responses = 0
M.last_request = nil -- { method, params, bufnr, invoked }
M.last_response = nil -- { method, err, result, items, stale, ms }
--- Acceptances of a whole suggestion and of a part (a word, a line).
M.accepted = {} -- { bufnr, inserted, command, kind, response = { err, result } }
M.partial = {} -- { kind, inserted }
--- The last 50 answers: { invoked, stale, items, err }.
M.history = {}
--- lspAssist/suggestionReady notices (the last 50): { uri, position, version, action }
--- where action is 'refresh' or why it was ignored; refreshes (the last 50): the
--- answers to the requests they made, { before, after, same, ms }.
M.ready = {}
M.refreshes = {}
--- Characters typed that matched the ghost (it was updated in place), and the
--- answers to the requests made after them: { before, after, same, ms } (the last 50).
M.typed_through = 0
M.typed_answers = {}
--- The telemetry notifications sent (the last 50): { method, item (its id),
--- accepted_length } for textDocument/didShowCompletion,
--- textDocument/didPartiallyAcceptCompletion and lspAssist/didDismissCompletion.
M.telemetry = {}
--- Cursor positions reported with lspAssist/didMoveCursor (the last 50): { bufnr, line,
--- character }.
M.cursor_reports = {}
M.errors = {} -- { where, err }

-- Keeping them ---------------------------------------------------------------------------

--- Append `entry` to `list` (the last M.LIMIT).
function M.push(list, entry)
  if not M.on then
    return
  end
  table.insert(list, entry)
  if #list > M.LIMIT then
    table.remove(list, 1)
  end
end

--- Add one to the counter `key` of `tbl`.
function M.count(tbl, key)
  if M.on then
    tbl[key] = (tbl[key] or 0) + 1
  end
end

--- Set `tbl[key]` to `value`.
function M.set(tbl, key, value)
  if M.on then
    tbl[key] = value
  end
end

return M
