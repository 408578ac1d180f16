-- wrk script: every request carries one of N user cookies (bench/cookies.sh),
-- so the load spreads over N sticky users. Env: COOKIES (file), METHOD, PATH_, BODY.
local cookies = {}
local index = 0
local method = os.getenv("METHOD") or "GET"
local path = os.getenv("PATH_") or "/api/counter"
local body = os.getenv("BODY")

function init(args)
  for line in io.lines(os.getenv("COOKIES") or "cookies.txt") do
    cookies[#cookies + 1] = line
  end
  index = math.random(#cookies)
end

function request()
  index = index % #cookies + 1
  return wrk.format(method, path, { ["Cookie"] = cookies[index] }, body)
end
