-- Shared by the headless Neovim scripts of tests/editors: run a scenario as a coroutine
-- that sleeps, waits for conditions and types keys while Neovim's loop goes on (so
-- timers, LSP answers and typeahead are processed between its steps).
--
--   local driver = dofile(dir .. 'nvim_driver.lua').new({ timeout_ms = 90000 })
--   driver.run(function() driver.keys('A'); driver.wait(cond) end, finish)

local M = {}

--- A driver. `opts.timeout_ms`: the whole scenario's deadline, for waits without a
--- timeout; `opts.wait_ms`: the default timeout of one wait (nil: none).
function M.new(opts)
  local d = { timed_out = false, error = nil }
  local started = vim.uv.now()
  local co

  local function resume()
    local ok, err = coroutine.resume(co)
    if not ok then
      d.error = debug.traceback(co, err)
    end
  end

  --- Let Neovim run for `ms`.
  function d.sleep(ms)
    vim.defer_fn(resume, ms)
    coroutine.yield()
  end

  --- Poll `cond` every 10 ms; false after `timeout` ms (default: opts.wait_ms, else the
  --- deadline, which then marks the driver timed out).
  function d.wait(cond, timeout)
    timeout = timeout or opts.wait_ms
    local t0 = vim.uv.now()
    while not cond() do
      local now = vim.uv.now()
      if timeout and now - t0 > timeout then
        return false
      end
      if not timeout and now - started > opts.timeout_ms then
        d.timed_out = true
        return false
      end
      d.sleep(10)
    end
    return true
  end

  --- Type `k` (key notation) as a user would: through mappings, as typed.
  function d.keys(k)
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'mt', false)
    d.sleep(30)
  end

  --- Stop the lsp-assist clients (the servers exit), then quit Neovim.
  function d.quit()
    for _, client in ipairs(vim.lsp.get_clients({ name = 'lsp_assist' })) do
      client:stop()
    end
    vim.wait(3000, function()
      return #vim.lsp.get_clients({ name = 'lsp_assist' }) == 0
    end, 50)
    vim.cmd('qa!')
  end

  --- Run `scenario` once Neovim has started, then `finish` (also after an error).
  function d.run(scenario, finish)
    co = coroutine.create(function()
      local ok, err = xpcall(scenario, debug.traceback)
      if not ok then
        d.error = err
      end
      finish()
    end)
    vim.schedule(resume)
  end

  return d
end

return M
