-- A GET of args[3] as a user picked at random for each request from the tokens in args[4]
-- (one per line): many distinct users and tokens, not one token repeated.
-- With args[5] = "each", the users are taken in turn instead (each wrk thread its share), so a
-- short run meets every user once: the warm-up before a steady-state run. With args[6] = "POST"
-- the request is a POST of "{}" from the device "bench-device" (content check-access).
local tokens = {}
local app_id, api_key, path, each, method
local turn = 0
local threads = 0

function setup(thread)
  thread:set("first", threads)
  threads = threads + 1
end

function init(args)
  app_id, api_key, path, each, method = args[1], args[2], args[3], args[5] == "each", args[6] or "GET"
  for line in io.lines(args[4]) do
    if #line > 0 then table.insert(tokens, line) end
  end
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end

function request()
  local token
  if each then
    -- wrk runs 2 threads in these benches: one takes the odd lines, the other the even ones.
    token = tokens[((first or 0) + 2 * turn) % #tokens + 1]
    turn = turn + 1
  else
    token = tokens[math.random(1, #tokens)]
  end
  if method == "POST" then
    return wrk.format("POST", path, {
      ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json", ["X-Device-ID"] = "bench-device",
    }, "{}")
  end
  return wrk.format("GET", path, {
    ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
  })
end
