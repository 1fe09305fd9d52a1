-- wrk script for bench_dataplane.py: a realistic sticky mix and the full latency distribution as one JSON line.
-- Arguments (after `--`): HOST COOKIE MINT_EVERY. Every MINT_EVERY-th request carries no cookie (the processor
-- mints one), the others carry a valid one. Requests are formatted once; request() only picks one of the two.
local with_cookie, without_cookie, mint_every
local n = 0

function init(args)
  local host, cookie = args[1], args[2]
  mint_every = tonumber(args[3])
  with_cookie = wrk.format("GET", "/", { ["Host"] = host, ["Cookie"] = cookie })
  without_cookie = wrk.format("GET", "/", { ["Host"] = host })
end

function request()
  n = n + 1
  if mint_every > 0 and n % mint_every == 0 then
    return without_cookie
  end
  return with_cookie
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
