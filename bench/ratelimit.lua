-- wrk script of bench/ratelimit.sh: POST /auth/token with an empty body (TokenGate answers 400
-- invalid_request before any database work) from the client addresses MODE says, sent as
-- X-Forwarded-For by a trusted proxy (the loopback peer). Arguments after `--`: MODE, one of
-- `one` (every request from one address), `distinct` (every request from an address never seen:
-- each needs a statement) or a number N (N addresses in turn).
local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("id", counter)
end

function init(args)
    mode = args[1] or "one"
    sent = 0
end

function request()
    sent = sent + 1
    local address
    if mode == "one" then
        address = "2001:db8::1"
    elseif mode == "distinct" then
        address = string.format("2001:db8:%x::%x:%x", id, math.floor(sent / 65536), sent % 65536)
    else
        address = string.format("2001:db8::%x", sent % tonumber(mode))
    end
    return wrk.format("POST", "/auth/token", {
        ["Content-Type"] = "application/x-www-form-urlencoded",
        ["X-Forwarded-For"] = address,
    }, "")
end
