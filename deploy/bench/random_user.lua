-- A GET of args[3] as a user picked at random for each request from the tokens in args[4]
-- (one per line): many distinct users and tokens, not one token repeated.
local tokens = {}
local app_id, api_key, path

function init(args)
  app_id, api_key, path = args[1], args[2], args[3]
  for line in io.lines(args[4]) do
    if #line > 0 then table.insert(tokens, line) end
  end
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end

function request()
  local token = tokens[math.random(1, #tokens)]
  return wrk.format("GET", path, {
    ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["Authorization"] = "Bearer " .. token,
  })
end
