-- steadfast's generic cell rate algorithm (GCRA), kept by Redis for a fleet.
--
-- One key per quota (KEYS[i]), holding the quota's theoretical arrival
-- time (TAT) as "<seconds> <nanoseconds>". A call of cost c is admitted if
-- every quota, moved to max(tat, now) + c * interval, runs at most its
-- window (burst * interval) ahead of now; then every TAT is moved, else
-- none is, and the reply is the wait until the call would fit.
--
-- Lua numbers here are doubles, exact for integers below 2^53: times are
-- kept as whole seconds plus nanoseconds, and only differences from now
-- (at most a window, which the client keeps below 2^53 ns) are computed in
-- nanoseconds.
--
-- ARGV[1]: the cost. ARGV[2], ARGV[3]: now as seconds and nanoseconds, or
-- "" and "" for the server's TIME (then every key expires when its quota is
-- full again). ARGV[2 + 2i], ARGV[3 + 2i]: quota i's interval and window,
-- in nanoseconds.
--
-- Reply: {1, 0} admitted; {0, wait_ns} refused; {0, -1} never (the cost is
-- above a quota's burst).
local NS = 1000000000
local cost = tonumber(ARGV[1])
local now_s, now_ns
local expire = ARGV[2] == ''
if expire then
  local t = redis.call('TIME')
  now_s = tonumber(t[1])
  now_ns = tonumber(t[2]) * 1000
else
  now_s = tonumber(ARGV[2])
  now_ns = tonumber(ARGV[3])
end

local ahead = {}
local wait = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i])
  local charge = interval * cost
  if charge > window then
    return {0, -1}
  end
  local d = 0
  local v = redis.call('GET', KEYS[i])
  if v then
    local s, ns = string.match(v, '^(%d+) (%d+)$')
    if not s then
      return redis.error_reply('steadfast: ' .. KEYS[i] .. ' holds no GCRA state')
    end
    d = (tonumber(s) - now_s) * NS + (tonumber(ns) - now_ns)
    if d < 0 then
      d = 0
    end
  end
  local nxt = d + charge
  ahead[i] = nxt
  if nxt - window > wait then
    wait = nxt - window
  end
end
if wait > 0 then
  return {0, wait}
end

for i = 1, #KEYS do
  local total = now_ns + ahead[i]
  local carry = math.floor(total / NS)
  local ns = total - carry * NS
  if ns < 0 then
    carry = carry - 1
    ns = ns + NS
  elseif ns >= NS then
    carry = carry + 1
    ns = ns - NS
  end
  local value = string.format('%d %d', now_s + carry, ns)
  if expire then
    redis.call('SET', KEYS[i], value, 'PX', math.ceil(ahead[i] / 1000000))
  else
    redis.call('SET', KEYS[i], value)
  end
end
return {1, 0}
