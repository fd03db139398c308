-- Runs calls of editors/nvim's decide.lua for tests/editors/test_nvim_decide.py.
--
--   nvim --headless --clean -l tests/editors/nvim_decide.lua PLUGIN CALLS.json OUT.json
--
-- PLUGIN: editors/nvim. CALLS: a JSON list of { fn, args, n } (n: how many arguments,
-- null ones included). The module is loaded with the Lua standard library only (no
-- `vim`): a decision that reached for the editor fails here. OUT: for each call
-- { ok, values } (its return values, null for nil) or { ok = false, error }.

local plugin, calls_path, out_path = arg[1], arg[2], arg[3]

local function read(path)
  local fh = assert(io.open(path, 'r'))
  local text = fh:read('*a')
  fh:close()
  return text
end

local pure = {
  ipairs = ipairs, pairs = pairs, type = type, next = next, select = select,
  tostring = tostring, tonumber = tonumber, error = error, assert = assert,
  string = string, table = table, math = math,
}
local chunk = assert(loadfile(plugin .. '/lua/lsp-assist/decide.lua'))
setfenv(chunk, pure)
local decide = chunk()

local calls = vim.json.decode(read(calls_path), { luanil = { object = true, array = true } })
local results = {}
for i, call in ipairs(calls) do
  local args = call.args or {}
  local packed = vim.F.pack_len(pcall(decide[call.fn], unpack(args, 1, call.n or #args)))
  if packed[1] then
    local values = {}
    for j = 2, packed.n do
      values[j - 1] = packed[j] == nil and vim.NIL or packed[j]
    end
    results[i] = { ok = true, values = values }
  else
    results[i] = { ok = false, error = tostring(packed[2]) }
  end
end

local fh = assert(io.open(out_path, 'w'))
fh:write(vim.json.encode(results))
fh:close()
