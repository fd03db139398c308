-- The plugin's LSP client: calls that work on Neovim 0.10 (fields) and 0.11+ (methods),
-- the client attached to a buffer, the requests in flight, and the telemetry
-- notifications about a suggestion.

local M = {}

local records = require('lsp-assist.records')
local state = require('lsp-assist.state')

M.NAME = 'lsp_assist'

--- bufnr -> { client_id, request_id, sent, here (the place asked at) }: the completion
--- request in flight for the buffer.
M.pending = {}

function M.has(version)
  return vim.fn.has('nvim-' .. version) == 1
end

--- Keep `err` (where it happened) for the tests.
function M.record_error(where, err)
  records.push(records.errors, { where = where, err = err })
end

--- Call a client method: Neovim 0.11 made them methods (client:notify), 0.10 has fields.
function M.call(client, name, ...)
  if M.has('0.11') then
    return client[name](client, ...)
  end
  return client[name](...)
end

function M.request(client, method, params, handler, bufnr)
  return M.call(client, 'request', method, params, handler, bufnr)
end

function M.supports(client, method)
  return M.call(client, 'supports_method', method)
end

--- The client attached to `bufnr` (nil: none).
function M.get(bufnr)
  local id = state.attached[bufnr]
  if not id then
    return nil
  end
  return vim.lsp.get_client_by_id(id)
end

--- Any running client of the plugin.
function M.any()
  return vim.lsp.get_clients({ name = M.NAME })[1]
end

--- Cancel the request in flight for `bufnr`.
function M.cancel_pending(bufnr)
  local previous = M.pending[bufnr]
  if previous then
    local client = vim.lsp.get_client_by_id(previous.client_id)
    if client then
      M.call(client, 'cancel_request', previous.request_id)
    end
    M.pending[bufnr] = nil
  end
end

--- Run `fn` (scheduled) `ms` after the last call for `key`: each call restarts the
--- wait. `timers`: the caller's key -> uv timer.
function M.debounce(timers, key, ms, fn)
  local timer = timers[key]
  if not timer then
    timer = (vim.uv or vim.loop).new_timer()
    timers[key] = timer
  end
  timer:stop()
  timer:start(ms, 0, vim.schedule_wrap(fn))
end

--- The item as the server sent it (Copilot's clients send it back in their telemetry).
function M.wire_item(item)
  return { insertText = item.text, range = item.range, command = item.command }
end

--- Tell the server about `item` (its telemetry: shown, partly accepted, dismissed).
function M.tell(client_id, method, item, params)
  local client = vim.lsp.get_client_by_id(client_id)
  if not client or not item or not item.command then
    return
  end
  params = params or {}
  local args = item.command.arguments or {}
  records.push(records.telemetry, {
    method = method, item = args[1] or vim.NIL, accepted_length = params.acceptedLength or vim.NIL,
  })
  local ok, err = pcall(M.call, client, 'notify', method, params)
  if not ok then
    M.record_error(method, err)
  end
end

return M
