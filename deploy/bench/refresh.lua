-- Refresh-token rotation: each connection keeps its own session and presents the token the
-- previous response gave it (a token is used once, as a real app does).
local tokens = {}
local app_id, api_key
local counter = 0
local pace

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end

function init(args)
  app_id = args[1]
  api_key = args[2]
  local file = args[3]
  if args[5] and args[6] then pace = math.floor(1000 * tonumber(args[6]) / tonumber(args[5])) end
  local n = 0
  for line in io.lines(file) do
    n = n + 1
    if (n % tonumber(args[4])) == tid - 1 then table.insert(tokens, line) end
  end
end

-- With args[5] (a rate per second) and args[6] (the connections), each connection waits
-- conns/rate seconds before each request: the run is paced near that rate, for a latency
-- figure at a given load rather than at saturation.
function delay()
  if pace then return pace end
  return 0
end

function request()
  local token = table.remove(tokens, 1) or "exhausted"
  local ip = string.format("10.%d.%d.%d", math.random(0, 255), math.random(0, 255), math.random(1, 254))
  return wrk.format("POST", "/auth/v1/auth/refresh", {
    ["Content-Type"] = "application/json", ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["X-Forwarded-For"] = ip,
  }, '{"refresh_token":"' .. token .. '"}')
end

function response(status, headers, body)
  local t = string.match(body, '"refresh_token":"([^"]+)"')
  if t then table.insert(tokens, t) end
end
