-- Records that only the tests read (requests and answers, notices, telemetry sent,
-- acceptances, errors), kept in require('lsp-assist').state and
-- require('lsp-assist.next_edit').state behind one switch: setup({ debug_records = true }).
-- Off (the default) they stay empty and nothing is kept.

local M = {}

--- Set by setup() from its `debug_records` option.
M.on = false

--- The last entries a list keeps.
M.LIMIT = 50

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
