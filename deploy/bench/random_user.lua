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
end

function request()
  local i, device = nil, "bench-device"
  if each then
    -- wrk runs 2 threads in these benches: one takes the odd turns, the other the even ones.
    local n = (first or 0) + 2 * turn
    turn = turn + 1
    if devices then
      i = math.floor(n / 5) % #tokens + 1
      device = "bench-device-" .. ((n % 5) % (1 + i % 5) + 1)
    else
      i = n % #tokens + 1
    end
  else
    i = math.random(1, #tokens)
    if devices then device = "bench-device-" .. math.random(1, 1 + i % 5) end
  end
  local token = tokens[i]
  if method == "POST" then
    return wrk.format("POST", path, {
      ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json", ["X-Device-ID"] = device,
    }, "{}")
  end
  return wrk.format("GET", path, {
    ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
  })
end

function response(status, headers, body)
  if stop_after then
    answers = answers + 1
    if answers >= stop_after then wrk.thread:stop() end
  end
end
