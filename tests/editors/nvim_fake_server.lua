-- An in-process stand-in for `lsp-assist serve`, for the key and status tests of
-- editors/nvim (tests/editors/nvim_keys.lua): Neovim's LSP client talks to it through a
-- `cmd` function, so the plugin's requests, cancellations and command calls are real,
-- while the answers are fixed and immediate enough to assert exact text.
--
--   local fake = dofile('tests/editors/nvim_fake_server.lua')
--   require('lsp-assist').setup({ cmd = fake.cmd })
--
-- fake.items: the suggestions; an Automatic request gets the first, an Invoked one all
-- (what the real server would do with several items on explicit requests).
-- fake.delay_ms: how long each answer takes. fake.typethrough: see typed_rest. fake.ready / fake.model_error: what
-- lspAssist.status says. fake.progress(kind, ...) sends $/progress for model loading.
-- fake.log: every request and notification received, in order. fake.notify(method,
-- params) sends a notification to the client (lspAssist/suggestionReady).

local fake = {
  items = { 'hello' },
  delay_ms = 10,
  ready = true,
  model_error = nil,
  log = {},
  accepted = {},
  dispatchers = nil,
}

local TOKEN = 'lsp-assist/model'

function fake.progress(kind, fields)
  local value = vim.tbl_extend('force', { kind = kind }, fields or {})
  fake.dispatchers.notification('$/progress', { token = TOKEN, value = value })
end

local function capabilities()
  return {
    capabilities = {
      textDocumentSync = { openClose = true, change = 2 },
      inlineCompletionProvider = vim.empty_dict(),
      completionProvider = { triggerCharacters = { '.' } },
      executeCommandProvider = {
        commands = { 'lspAssist.accept', 'lspAssist.status', 'lspAssist.explainContext' },
      },
    },
    serverInfo = { name = 'fake lsp-assist', version = '0' },
  }
end

--- fake.typethrough: an Automatic request further along the line of the last one
--- (the user typed into its suggestion) gets the rest of that suggestion, as the real
--- server's type-through cache answers.
local function typed_rest(params)
  local last = fake.last_automatic
  local position = params.position
  if last and last.uri == params.textDocument.uri and last.line == position.line
    and position.character > last.character then
    local rest = last.text:sub(position.character - last.character + 1)
    if rest ~= '' then
      return rest
    end
  end
  fake.last_automatic = {
    uri = params.textDocument.uri, line = position.line, character = position.character,
    text = fake.items[1],
  }
  return nil
end

local function inline_items(params)
  local texts = fake.items
  if params.context and params.context.triggerKind == 2 then
    texts = { fake.typethrough and typed_rest(params) or texts[1] }
  end
  local items = {}
  for i, text in ipairs(texts) do
    table.insert(items, {
      insertText = text,
      range = { start = params.position, ['end'] = params.position },
      command = { title = 'Accept', command = 'lspAssist.accept', arguments = { 'req-' .. i } },
    })
  end
  return { items = items }
end

function fake.cmd(dispatchers)
  fake.dispatchers = dispatchers
  local closing = false
  local next_id = 0
  local cancelled = {}
  local server = {}

  function server.request(method, params, callback, notify_reply_callback)
    next_id = next_id + 1
    local id = next_id
    table.insert(fake.log, { id = id, method = method, params = params, t = vim.uv.now() })
    local function reply(err, result, delay)
      vim.defer_fn(function()
        if notify_reply_callback then
          notify_reply_callback(id)
        end
        if cancelled[id] then
          callback({ code = -32800, message = 'cancelled' }, nil)
        else
          callback(err, result)
        end
      end, delay or 0)
    end
    if method == 'initialize' then
      reply(nil, capabilities())
    elseif method == 'textDocument/inlineCompletion' then
      reply(nil, inline_items(params), fake.delay_ms)
    elseif method == 'workspace/executeCommand' then
      if params.command == 'lspAssist.accept' then
        table.insert(fake.accepted, params.arguments[1])
        reply(nil, { accepted = true, request_id = params.arguments[1] })
      elseif params.command == 'lspAssist.status' then
        reply(nil, {
          initialized = true,
          ready = fake.ready,
          -- As the real server: an empty string when the model has no error.
          model = { loaded = fake.ready and not fake.model_error, error = fake.model_error or '' },
          last_latencies_ms = {},
        })
      else
        reply(nil, { text = 'explained' })
      end
    elseif method == 'shutdown' then
      reply(nil, vim.NIL)
    else
      reply({ code = -32601, message = 'not in the fake: ' .. method }, nil)
    end
    return true, id
  end

  function server.notify(method, params)
    table.insert(fake.log, { method = method, params = params, t = vim.uv.now() })
    if method == '$/cancelRequest' then
      cancelled[params.id] = true
    elseif method == 'exit' then
      closing = true
      vim.schedule(function()
        dispatchers.on_exit(0, 0)
      end)
    end
    return true
  end

  function server.is_closing()
    return closing
  end

  function server.terminate()
    if not closing then
      closing = true
      vim.schedule(function()
        dispatchers.on_exit(0, 15)
      end)
    end
  end

  return server
end

--- Send a notification to the client, as the server would (lspAssist/suggestionReady).
function fake.notify(method, params)
  fake.dispatchers.notification(method, params)
end

--- The requests of one method the fake received, in order.
function fake.requests(method)
  return vim.tbl_filter(function(entry)
    return entry.method == method and entry.id ~= nil
  end, fake.log)
end

return fake
