-- Email login flood over pre-registered accounts.
local emails = {}
local app_id, api_key

function init(args)
  app_id = args[1]
  api_key = args[2]
  for line in io.lines(args[3]) do table.insert(emails, line) end
end

function request()
  local email = emails[math.random(1, #emails)]
  local ip = string.format("10.%d.%d.%d", math.random(0, 255), math.random(0, 255), math.random(1, 254))
  return wrk.format("POST", "/auth/v1/auth/login", {
    ["Content-Type"] = "application/json", ["X-App-ID"] = app_id, ["X-API-Key"] = api_key, ["X-Forwarded-For"] = ip,
  }, '{"provider":"email","credentials":{"email":"' .. email .. '","password":"Tr1cky-Geography-42"},"device_info":{"device_id":"bench"}}')
end
