-- A GET of args[3] as a user picked at random for each request from the tokens in args[4]
-- (one per line): many distinct users and tokens, not one token repeated.
-- With args[5] = "each", the users are taken in turn instead (each wrk thread its share), so a
-- short run meets every user once: the warm-up before a steady-state run. With args[6] = "POST"
-- the request is a POST of "{}" from the device "bench-device" (content check-access); with
-- args[7] = "devices" too, user number i plays on 1 + i % 5 devices ("bench-device-1" ...), one
-- at random per request (in turn with "each": five turns per user). With args[8] = N, each wrk
-- thread stops after N answers: a warm-up that ends once every device is met, however fast.
local tokens = {}
local app_id, api_key, path, each, method, devices
local turn = 0
local answers, stop_after = 0, nil
local threads = 0

function setup(thread)
  thread:set("first", threads)
  threads = threads + 1
end

function init(args)
  app_id, api_key, path, each, method, devices = args[1], args[2], args[3], args[5] == "each", args[6] or "GET", args[7] == "devices"
  stop_after = tonumber(args[8] or "")
  for line in io.lines(args[4]) do
    if #line > 0 then table.insert(tokens, line) end
  end
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
  -- Each (user, device) request is formatted once here, not once per request: the client shares
  -- the 2 cores with the service it measures, and wrk.format per request cost about as much as
  -- the Lua that picks the user. Likewise response() is defined only when a run counts answers:
  -- with it, wrk hands every answer's headers and body to Lua.
  if not stop_after then response = nil end
end

-- requests[i][d]: user i's request from device d, formatted on first use.
local requests = {}
local function formatted(i, d)
  local per_user = requests[i]
  if not per_user then per_user = {}; requests[i] = per_user end
  local r = per_user[d]
  if r then return r end
  local token = tokens[i]
  if method == "POST" then
    r = wrk.format("POST", path, {
      ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json", ["X-Device-ID"] = "bench-device" .. d,
    }, "{}")
  else
    r = wrk.format("GET", path, {
      ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
    })
  end
  per_user[d] = r
  return r
end

function request()
  local i, d = nil, ""
  if each then
    -- wrk runs 2 threads in these benches: one takes the odd turns, the other the even ones.
    local n = (first or 0) + 2 * turn
    turn = turn + 1
    if devices then
      i = math.floor(n / 5) % #tokens + 1
      d = "-" .. ((n % 5) % (1 + i % 5) + 1)
    else
      i = n % #tokens + 1
    end
  else
    i = math.random(1, #tokens)
    if devices then d = "-" .. math.random(1, 1 + i % 5) end
  end
  return formatted(i, d)
end

function response(status, headers, body)
  answers = answers + 1
  if answers >= stop_after then wrk.thread:stop() end
end
